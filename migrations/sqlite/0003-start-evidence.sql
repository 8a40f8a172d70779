-- Evidence facts of a start (R3.3) and the StepRun mutation ledger (R3.6). Append-only.
CREATE TABLE security_audit_events (
  audit_event_id     TEXT    NOT NULL PRIMARY KEY,
  start_id           TEXT    NOT NULL,
  run_id             TEXT    NOT NULL,
  step_run_id        TEXT    NOT NULL,
  audit_event_digest TEXT    NOT NULL,
  event_json         TEXT    NOT NULL,
  committed_at_ms    INTEGER NOT NULL
) STRICT;

CREATE TABLE trace_anchors (
  trace_id        TEXT    NOT NULL PRIMARY KEY,
  span_id         TEXT    NOT NULL,
  start_id        TEXT    NOT NULL,
  run_id          TEXT    NOT NULL,
  step_run_id     TEXT    NOT NULL,
  trace_digest    TEXT    NOT NULL,
  anchor_json     TEXT    NOT NULL,
  committed_at_ms INTEGER NOT NULL
) STRICT;

CREATE TABLE audit_receipts (
  audit_receipt_id TEXT    NOT NULL PRIMARY KEY,
  audit_event_id   TEXT    NOT NULL UNIQUE REFERENCES security_audit_events (audit_event_id),
  trace_id         TEXT    NOT NULL UNIQUE REFERENCES trace_anchors (trace_id),
  start_id         TEXT    NOT NULL,
  receipt_digest   TEXT    NOT NULL,
  receipt_json     TEXT    NOT NULL,
  committed_at_ms  INTEGER NOT NULL
) STRICT;

CREATE TABLE step_run_mutations (
  mutation_id             TEXT    NOT NULL PRIMARY KEY,
  run_event_id            TEXT    NOT NULL UNIQUE REFERENCES events (event_id),
  start_id                TEXT    NOT NULL,
  run_id                  TEXT    NOT NULL,
  step_run_id             TEXT    NOT NULL,
  from_status             TEXT    NOT NULL,
  to_status               TEXT    NOT NULL CHECK (to_status = 'running'),
  from_version            INTEGER NOT NULL,
  to_version              INTEGER NOT NULL CHECK (to_version = from_version + 1),
  run_event_sequence      INTEGER NOT NULL,
  mutation_digest         TEXT    NOT NULL,
  started_step_run_digest TEXT    NOT NULL,
  mutation_json           TEXT    NOT NULL,
  requested_at_ms         INTEGER NOT NULL,
  committed_at_ms         INTEGER NOT NULL,
  FOREIGN KEY (run_id, step_run_id) REFERENCES step_runs (run_id, step_run_id)
) STRICT;

CREATE TRIGGER security_audit_events_no_update BEFORE UPDATE ON security_audit_events BEGIN SELECT RAISE(ABORT, 'security audit events are append-only'); END;
CREATE TRIGGER security_audit_events_no_delete BEFORE DELETE ON security_audit_events BEGIN SELECT RAISE(ABORT, 'security audit events are append-only'); END;
CREATE TRIGGER trace_anchors_no_update BEFORE UPDATE ON trace_anchors BEGIN SELECT RAISE(ABORT, 'trace anchors are append-only'); END;
CREATE TRIGGER trace_anchors_no_delete BEFORE DELETE ON trace_anchors BEGIN SELECT RAISE(ABORT, 'trace anchors are append-only'); END;
CREATE TRIGGER audit_receipts_no_update BEFORE UPDATE ON audit_receipts BEGIN SELECT RAISE(ABORT, 'audit receipts are append-only'); END;
CREATE TRIGGER audit_receipts_no_delete BEFORE DELETE ON audit_receipts BEGIN SELECT RAISE(ABORT, 'audit receipts are append-only'); END;
CREATE TRIGGER step_run_mutations_no_update BEFORE UPDATE ON step_run_mutations BEGIN SELECT RAISE(ABORT, 'the mutation ledger is append-only'); END;
CREATE TRIGGER step_run_mutations_no_delete BEFORE DELETE ON step_run_mutations BEGIN SELECT RAISE(ABORT, 'the mutation ledger is append-only'); END;
