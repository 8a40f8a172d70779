-- One driver per attempt (R11.2): the lease a saga takes on a committed start before it may
-- invoke its adapter. Rows are facts: a claim (generation N, leased until a database-clock
-- time) and, when its driver is done with the attempt, the release of that generation. Two
-- drivers racing for the same generation meet the primary key: one inserts, the other sees
-- the winner's live lease. The SQLite twin is 0060-adapter-driver-claims.
SET LOCAL ROLE ql3_owner;

CREATE TABLE ql3.adapter_driver_claims (
  start_id       TEXT   NOT NULL REFERENCES ql3.tool_execution_start_barriers (start_id),
  generation     BIGINT NOT NULL CHECK (generation >= 1),
  kind           TEXT   NOT NULL CHECK (kind IN ('claim', 'release')),
  driver_id      TEXT   NOT NULL,
  at_ms          BIGINT NOT NULL,
  lease_until_ms BIGINT NOT NULL,
  PRIMARY KEY (start_id, generation, kind)
);

CREATE TRIGGER adapter_driver_claims_append_only BEFORE UPDATE OR DELETE ON ql3.adapter_driver_claims
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('driver claims are facts: append a new generation instead');
CREATE TRIGGER adapter_driver_claims_no_truncate BEFORE TRUNCATE ON ql3.adapter_driver_claims
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('driver claims are facts: append a new generation instead');

GRANT SELECT, INSERT ON ql3.adapter_driver_claims TO ql3_runtime;
GRANT SELECT ON ql3.adapter_driver_claims TO ql3_admin;
