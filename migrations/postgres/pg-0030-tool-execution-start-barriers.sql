-- ADR-0158 (R5.2): the immutable start barrier, with foreign keys to its StepRun, mutation,
-- RunEvent, Trace anchor, Audit event and Audit receipt; the replay-identity index of R4.1;
-- control-core moves to v29. Only ql3_runtime may touch the barrier, and only SELECT, INSERT.
SET LOCAL ROLE ql3_owner;

CREATE TABLE ql3.tool_execution_start_barriers (
  start_id                 TEXT   NOT NULL PRIMARY KEY,
  command_digest           TEXT   NOT NULL,
  barrier_digest           TEXT   NOT NULL,
  barrier_json             TEXT   NOT NULL,
  project_id               TEXT   NOT NULL,
  run_id                   TEXT   NOT NULL,
  step_run_id              TEXT   NOT NULL,
  started_step_run_version BIGINT NOT NULL,
  started_step_run_digest  TEXT   NOT NULL,
  mutation_id              TEXT   NOT NULL REFERENCES ql3.step_run_mutations (mutation_id),
  mutation_digest          TEXT   NOT NULL,
  run_event_id             TEXT   NOT NULL REFERENCES ql3.events (event_id),
  trace_id                 TEXT   NOT NULL REFERENCES ql3.trace_anchors (trace_id),
  trace_digest             TEXT   NOT NULL,
  audit_event_id           TEXT   NOT NULL REFERENCES ql3.security_audit_events (audit_event_id),
  audit_receipt_id         TEXT   NOT NULL REFERENCES ql3.audit_receipts (audit_receipt_id),
  audit_receipt_digest     TEXT   NOT NULL,
  adapter_id               TEXT   NOT NULL,
  committed_at_ms          BIGINT NOT NULL,
  CONSTRAINT tool_execution_start_barriers_mutation_id_key UNIQUE (mutation_id),
  CONSTRAINT tool_execution_start_barriers_run_event_id_key UNIQUE (run_event_id),
  CONSTRAINT tool_execution_start_barriers_trace_id_key UNIQUE (trace_id),
  CONSTRAINT tool_execution_start_barriers_audit_event_id_key UNIQUE (audit_event_id),
  CONSTRAINT tool_execution_start_barriers_audit_receipt_id_key UNIQUE (audit_receipt_id),
  CONSTRAINT tool_execution_start_barriers_attempt_key UNIQUE (run_id, step_run_id, started_step_run_version),
  FOREIGN KEY (run_id, step_run_id) REFERENCES ql3.step_runs (run_id, step_run_id)
);

-- One row per identity; a unique index (not a primary key) so corruption specs can drop it
-- and prove that a duplicated identity fails closed.
CREATE TABLE ql3.start_replay_identities (
  identity       TEXT NOT NULL CHECK (identity IN ('startId', 'mutationId', 'runEventId', 'traceId', 'auditEventId', 'auditReceiptId', 'attempt')),
  value          TEXT NOT NULL,
  start_id       TEXT NOT NULL REFERENCES ql3.tool_execution_start_barriers (start_id),
  command_digest TEXT NOT NULL
);
CREATE UNIQUE INDEX start_replay_identities_key ON ql3.start_replay_identities (identity, value);
CREATE INDEX start_replay_identities_start ON ql3.start_replay_identities (start_id);

CREATE TRIGGER tool_execution_start_barriers_immutable BEFORE UPDATE OR DELETE ON ql3.tool_execution_start_barriers
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('start barriers are immutable');
CREATE TRIGGER tool_execution_start_barriers_no_truncate BEFORE TRUNCATE ON ql3.tool_execution_start_barriers
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('start barriers are immutable');
CREATE TRIGGER start_replay_identities_immutable BEFORE UPDATE OR DELETE ON ql3.start_replay_identities
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('replay identities are immutable');
CREATE TRIGGER start_replay_identities_no_truncate BEFORE TRUNCATE ON ql3.start_replay_identities
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('replay identities are immutable');

-- R5.2: SELECT, INSERT to ql3_runtime and nothing to anyone else. The explicit REVOKEs
-- document (and enforce, against a hand-made earlier grant) that no product role has a right.
REVOKE ALL ON ql3.tool_execution_start_barriers, ql3.start_replay_identities FROM PUBLIC;
REVOKE ALL ON ql3.tool_execution_start_barriers, ql3.start_replay_identities
  FROM ql3_admin, ql3_reader, ql3_worker_ingress, ql3_package_executor;
GRANT SELECT, INSERT ON ql3.tool_execution_start_barriers, ql3.start_replay_identities TO ql3_runtime;

-- control-core v29 (ADR-0158; the SQLite twin is local-control-core v28 in 0056).
CREATE TABLE IF NOT EXISTS ql3.capabilities (
  name    TEXT   NOT NULL PRIMARY KEY,
  version BIGINT NOT NULL
);
INSERT INTO ql3.capabilities (name, version) VALUES ('control-core', 29)
  ON CONFLICT (name) DO UPDATE SET version = excluded.version WHERE excluded.version > ql3.capabilities.version;
GRANT SELECT ON ql3.capabilities TO ql3_runtime, ql3_admin;
