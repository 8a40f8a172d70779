-- One driver per attempt (R11.2): the lease a saga takes on a committed start before it may
-- invoke its adapter. Rows are facts: a claim (generation N, leased until a database-clock
-- time) and, when its driver is done with the attempt, the release of that generation. A new
-- generation can be claimed only after the previous one was released or its lease ran out,
-- and any generation after the first tells the saga that an earlier driver may have invoked.
-- The PostgreSQL twin is pg-0034-adapter-driver-claims.
CREATE TABLE adapter_driver_claims (
  start_id       TEXT    NOT NULL REFERENCES tool_execution_start_barriers (start_id),
  generation     INTEGER NOT NULL CHECK (generation >= 1),
  kind           TEXT    NOT NULL CHECK (kind IN ('claim', 'release')),
  driver_id      TEXT    NOT NULL,
  at_ms          INTEGER NOT NULL,
  lease_until_ms INTEGER NOT NULL,
  PRIMARY KEY (start_id, generation, kind)
) STRICT;

CREATE TRIGGER adapter_driver_claims_no_update BEFORE UPDATE ON adapter_driver_claims BEGIN SELECT RAISE(ABORT, 'driver claims are facts: append a new generation instead'); END;
CREATE TRIGGER adapter_driver_claims_no_delete BEFORE DELETE ON adapter_driver_claims BEGIN SELECT RAISE(ABORT, 'driver claims are facts: append a new generation instead'); END;
