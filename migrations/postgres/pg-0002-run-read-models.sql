-- Inline projections of the Run stream that a start locks and reads in constant time (no fold
-- of the stream on the hot path): the Run head and one row per StepRun. The only mutable
-- tables the runtime may UPDATE, always as a compare-and-set on version (R3.4, R3.5).
SET LOCAL ROLE ql3_owner;

CREATE TABLE ql3.runs (
  run_id          TEXT   NOT NULL PRIMARY KEY,
  project_id      TEXT   NOT NULL,
  snapshot_id     TEXT   NOT NULL,
  snapshot_digest TEXT   NOT NULL,
  version         BIGINT NOT NULL CHECK (version >= 1)
);

CREATE TABLE ql3.step_runs (
  run_id      TEXT   NOT NULL REFERENCES ql3.runs (run_id),
  step_run_id TEXT   NOT NULL,
  project_id  TEXT   NOT NULL,
  kind        TEXT   NOT NULL,
  status      TEXT   NOT NULL,
  version     BIGINT NOT NULL CHECK (version >= 1),
  digest      TEXT   NOT NULL,
  state_json  TEXT   NOT NULL,
  PRIMARY KEY (run_id, step_run_id)
);

GRANT SELECT, INSERT, UPDATE ON ql3.runs, ql3.step_runs TO ql3_runtime;
GRANT SELECT ON ql3.runs, ql3.step_runs TO ql3_admin, ql3_reader;
