-- Evidence facts of a start (R3.3) and the StepRun mutation ledger (R3.6). Append-only.
SET LOCAL ROLE ql3_owner;

CREATE TABLE ql3.security_audit_events (
  audit_event_id     TEXT   NOT NULL PRIMARY KEY,
  start_id           TEXT   NOT NULL,
  run_id             TEXT   NOT NULL,
  step_run_id        TEXT   NOT NULL,
  audit_event_digest TEXT   NOT NULL,
  event_json         TEXT   NOT NULL,
  committed_at_ms    BIGINT NOT NULL
);

CREATE TABLE ql3.trace_anchors (
  trace_id        TEXT   NOT NULL PRIMARY KEY,
  span_id         TEXT   NOT NULL,
  start_id        TEXT   NOT NULL,
  run_id          TEXT   NOT NULL,
  step_run_id     TEXT   NOT NULL,
  trace_digest    TEXT   NOT NULL,
  anchor_json     TEXT   NOT NULL,
  committed_at_ms BIGINT NOT NULL
);

CREATE TABLE ql3.audit_receipts (
  audit_receipt_id TEXT   NOT NULL PRIMARY KEY,
  audit_event_id   TEXT   NOT NULL REFERENCES ql3.security_audit_events (audit_event_id),
  trace_id         TEXT   NOT NULL REFERENCES ql3.trace_anchors (trace_id),
  start_id         TEXT   NOT NULL,
  receipt_digest   TEXT   NOT NULL,
  receipt_json     TEXT   NOT NULL,
  committed_at_ms  BIGINT NOT NULL,
  CONSTRAINT audit_receipts_audit_event_id_key UNIQUE (audit_event_id),
  CONSTRAINT audit_receipts_trace_id_key UNIQUE (trace_id)
);

CREATE TABLE ql3.step_run_mutations (
  mutation_id             TEXT   NOT NULL PRIMARY KEY,
  run_event_id            TEXT   NOT NULL REFERENCES ql3.events (event_id),
  start_id                TEXT   NOT NULL,
  run_id                  TEXT   NOT NULL,
  step_run_id             TEXT   NOT NULL,
  from_status             TEXT   NOT NULL,
  to_status               TEXT   NOT NULL CHECK (to_status = 'running'),
  from_version            BIGINT NOT NULL,
  to_version              BIGINT NOT NULL CHECK (to_version = from_version + 1),
  run_event_sequence      BIGINT NOT NULL,
  mutation_digest         TEXT   NOT NULL,
  started_step_run_digest TEXT   NOT NULL,
  mutation_json           TEXT   NOT NULL,
  requested_at_ms         BIGINT NOT NULL,
  committed_at_ms         BIGINT NOT NULL,
  CONSTRAINT step_run_mutations_run_event_id_key UNIQUE (run_event_id),
  FOREIGN KEY (run_id, step_run_id) REFERENCES ql3.step_runs (run_id, step_run_id)
);

CREATE TRIGGER security_audit_events_append_only BEFORE UPDATE OR DELETE ON ql3.security_audit_events
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('security audit events are append-only');
CREATE TRIGGER security_audit_events_no_truncate BEFORE TRUNCATE ON ql3.security_audit_events
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('security audit events are append-only');
CREATE TRIGGER trace_anchors_append_only BEFORE UPDATE OR DELETE ON ql3.trace_anchors
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('trace anchors are append-only');
CREATE TRIGGER trace_anchors_no_truncate BEFORE TRUNCATE ON ql3.trace_anchors
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('trace anchors are append-only');
CREATE TRIGGER audit_receipts_append_only BEFORE UPDATE OR DELETE ON ql3.audit_receipts
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('audit receipts are append-only');
CREATE TRIGGER audit_receipts_no_truncate BEFORE TRUNCATE ON ql3.audit_receipts
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('audit receipts are append-only');
CREATE TRIGGER step_run_mutations_append_only BEFORE UPDATE OR DELETE ON ql3.step_run_mutations
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('the mutation ledger is append-only');
CREATE TRIGGER step_run_mutations_no_truncate BEFORE TRUNCATE ON ql3.step_run_mutations
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('the mutation ledger is append-only');

GRANT SELECT, INSERT ON ql3.security_audit_events, ql3.trace_anchors, ql3.audit_receipts, ql3.step_run_mutations TO ql3_runtime;
