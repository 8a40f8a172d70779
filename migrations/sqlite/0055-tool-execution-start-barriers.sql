-- ADR-0158 (R5.1): the immutable start barrier, with foreign keys to its StepRun, mutation,
-- RunEvent, Trace and Audit receipt, and the replay-identity index of R4.1.
CREATE TABLE tool_execution_start_barriers (
  start_id                 TEXT    NOT NULL PRIMARY KEY,
  command_digest           TEXT    NOT NULL,
  barrier_digest           TEXT    NOT NULL,
  barrier_json             TEXT    NOT NULL,
  project_id               TEXT    NOT NULL,
  run_id                   TEXT    NOT NULL,
  step_run_id              TEXT    NOT NULL,
  started_step_run_version INTEGER NOT NULL,
  started_step_run_digest  TEXT    NOT NULL,
  mutation_id              TEXT    NOT NULL UNIQUE REFERENCES step_run_mutations (mutation_id),
  mutation_digest          TEXT    NOT NULL,
  run_event_id             TEXT    NOT NULL UNIQUE REFERENCES events (event_id),
  trace_id                 TEXT    NOT NULL UNIQUE REFERENCES trace_anchors (trace_id),
  trace_digest             TEXT    NOT NULL,
  audit_event_id           TEXT    NOT NULL UNIQUE REFERENCES security_audit_events (audit_event_id),
  audit_receipt_id         TEXT    NOT NULL UNIQUE REFERENCES audit_receipts (audit_receipt_id),
  audit_receipt_digest     TEXT    NOT NULL,
  adapter_id               TEXT    NOT NULL,
  committed_at_ms          INTEGER NOT NULL,
  UNIQUE (run_id, step_run_id, started_step_run_version),
  FOREIGN KEY (run_id, step_run_id) REFERENCES step_runs (run_id, step_run_id)
) STRICT;

-- One row per identity; a unique index (not a primary key) so corruption specs can drop it
-- and prove that a duplicated identity fails closed.
CREATE TABLE start_replay_identities (
  identity       TEXT NOT NULL CHECK (identity IN ('startId', 'mutationId', 'runEventId', 'traceId', 'auditEventId', 'auditReceiptId', 'attempt')),
  value          TEXT NOT NULL,
  start_id       TEXT NOT NULL REFERENCES tool_execution_start_barriers (start_id),
  command_digest TEXT NOT NULL
) STRICT;
CREATE UNIQUE INDEX start_replay_identities_key ON start_replay_identities (identity, value);
CREATE INDEX start_replay_identities_start ON start_replay_identities (start_id);

CREATE TRIGGER tool_execution_start_barriers_no_update BEFORE UPDATE ON tool_execution_start_barriers BEGIN SELECT RAISE(ABORT, 'start barriers are immutable'); END;
CREATE TRIGGER tool_execution_start_barriers_no_delete BEFORE DELETE ON tool_execution_start_barriers BEGIN SELECT RAISE(ABORT, 'start barriers are immutable'); END;
CREATE TRIGGER start_replay_identities_no_update BEFORE UPDATE ON start_replay_identities BEGIN SELECT RAISE(ABORT, 'replay identities are immutable'); END;
CREATE TRIGGER start_replay_identities_no_delete BEFORE DELETE ON start_replay_identities BEGIN SELECT RAISE(ABORT, 'replay identities are immutable'); END;
