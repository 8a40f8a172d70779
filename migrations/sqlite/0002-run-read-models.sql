-- Inline projections of the Run stream that a start reads in constant time (no fold of the
-- stream on the hot path): the Run head and one row per StepRun.
CREATE TABLE runs (
  run_id          TEXT    NOT NULL PRIMARY KEY,
  project_id      TEXT    NOT NULL,
  snapshot_id     TEXT    NOT NULL,
  snapshot_digest TEXT    NOT NULL,
  version         INTEGER NOT NULL CHECK (version >= 1)
) STRICT;

CREATE TABLE step_runs (
  run_id      TEXT    NOT NULL REFERENCES runs (run_id),
  step_run_id TEXT    NOT NULL,
  project_id  TEXT    NOT NULL,
  kind        TEXT    NOT NULL,
  status      TEXT    NOT NULL,
  version     INTEGER NOT NULL CHECK (version >= 1),
  digest      TEXT    NOT NULL,
  state_json  TEXT    NOT NULL,
  PRIMARY KEY (run_id, step_run_id)
) STRICT;
