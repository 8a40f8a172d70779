-- R14.2 retention: an operator compacts a finished Run into one record that binds, by digest,
-- everything removed (the log's digest and its last chain link, each barrier's digest, every
-- identity); the identities stay here so they refuse reuse and an exact replay answers
-- START_COMPACTED. Nothing else writes these tables.
--
-- The guard: a row of the two tables below is written only where ql3_retention_gate() is
-- registered, which only the retention path (openSqliteRetention) does on its connection; on the
-- runtime's connection the insert does not even prepare ("no such function"), so the runtime
-- cannot forge a record. Every append-only table's delete guard now lets a row go only once its
-- Run's record (or its start's compacted identity) is written, in the same transaction; any
-- other delete is refused with the guard's words as before. A writer that registers the
-- function or drops the triggers is what `verify` is for: a missing row that no record binds
-- breaks the chain, the dense log or a digest. The PostgreSQL twin is pg-0067.
CREATE TABLE run_compactions (
  run_id            TEXT NOT NULL PRIMARY KEY,
  record_json       TEXT NOT NULL CHECK (json_valid(record_json)),
  compaction_digest TEXT NOT NULL CHECK (compaction_digest GLOB 'sha256:*' AND length(compaction_digest) = 71)
) STRICT;

CREATE TABLE compacted_identities (
  identity       TEXT NOT NULL CHECK (identity IN ('startId', 'mutationId', 'runEventId', 'traceId', 'auditEventId', 'auditReceiptId', 'attempt')),
  value          TEXT NOT NULL,
  start_id       TEXT NOT NULL,
  run_id         TEXT NOT NULL REFERENCES run_compactions (run_id),
  command_digest TEXT NOT NULL,
  barrier_digest TEXT NOT NULL,
  PRIMARY KEY (identity, value)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER run_compactions_by_retention BEFORE INSERT ON run_compactions WHEN ql3_retention_gate() IS NOT 1
BEGIN SELECT RAISE(ABORT, 'a compaction record is written by the retention path only (R14.2)'); END;
CREATE TRIGGER run_compactions_no_update BEFORE UPDATE ON run_compactions BEGIN SELECT RAISE(ABORT, 'compaction records are immutable'); END;
CREATE TRIGGER run_compactions_no_delete BEFORE DELETE ON run_compactions BEGIN SELECT RAISE(ABORT, 'compaction records are immutable'); END;
CREATE TRIGGER compacted_identities_by_retention BEFORE INSERT ON compacted_identities WHEN ql3_retention_gate() IS NOT 1
BEGIN SELECT RAISE(ABORT, 'a compacted identity is written by the retention path only (R14.2)'); END;
CREATE TRIGGER compacted_identities_no_update BEFORE UPDATE ON compacted_identities BEGIN SELECT RAISE(ABORT, 'compacted identities are immutable'); END;
CREATE TRIGGER compacted_identities_no_delete BEFORE DELETE ON compacted_identities BEGIN SELECT RAISE(ABORT, 'compacted identities are immutable'); END;

-- a compacted Run is never written again: its stream cannot be made anew
CREATE TRIGGER streams_not_compacted BEFORE INSERT ON streams
  WHEN EXISTS (SELECT 1 FROM run_compactions c WHERE 'run-' || c.run_id = NEW.stream_id)
BEGIN SELECT RAISE(ABORT, 'illegal history refused: a compacted Run is never written again (R14.2)'); END;

-- the delete guards: a row goes only with its Run's compaction record written first
DROP TRIGGER events_no_delete;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events WHEN NOT EXISTS (SELECT 1 FROM run_compactions c WHERE 'run-' || c.run_id = OLD.stream_id)
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
DROP TRIGGER start_outcomes_no_delete;
CREATE TRIGGER start_outcomes_no_delete BEFORE DELETE ON start_outcomes WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'start outcomes are facts: append a new event instead'); END;
DROP TRIGGER resolution_notes_no_delete;
CREATE TRIGGER resolution_notes_no_delete BEFORE DELETE ON resolution_notes WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'a resolution note is purged, never deleted: its digest stays bound'); END;
DROP TRIGGER adapter_driver_claims_no_delete;
CREATE TRIGGER adapter_driver_claims_no_delete BEFORE DELETE ON adapter_driver_claims WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'driver claims are facts: append a new generation instead'); END;
DROP TRIGGER streams_no_delete;
CREATE TRIGGER streams_no_delete BEFORE DELETE ON streams WHEN NOT EXISTS (SELECT 1 FROM run_compactions c WHERE 'run-' || c.run_id = OLD.stream_id)
BEGIN SELECT RAISE(ABORT, 'illegal history refused: a stream head is never deleted (R9.1)'); END;
DROP TRIGGER runs_no_delete;
CREATE TRIGGER runs_no_delete BEFORE DELETE ON runs WHEN NOT EXISTS (SELECT 1 FROM run_compactions c WHERE c.run_id = OLD.run_id)
BEGIN SELECT RAISE(ABORT, 'illegal history refused: a Run head is never deleted (R9.1)'); END;
DROP TRIGGER step_runs_no_delete;
CREATE TRIGGER step_runs_no_delete BEFORE DELETE ON step_runs WHEN NOT EXISTS (SELECT 1 FROM run_compactions c WHERE c.run_id = OLD.run_id)
BEGIN SELECT RAISE(ABORT, 'illegal history refused: a StepRun is never deleted (R9.1)'); END;
DROP TRIGGER start_evidence_macs_no_delete;
CREATE TRIGGER start_evidence_macs_no_delete BEFORE DELETE ON start_evidence_macs WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'evidence MACs are immutable'); END;
DROP TRIGGER run_event_macs_no_delete;
CREATE TRIGGER run_event_macs_no_delete BEFORE DELETE ON run_event_macs WHEN NOT EXISTS (SELECT 1 FROM run_compactions c WHERE 'run-' || c.run_id = OLD.stream_id)
BEGIN SELECT RAISE(ABORT, 'event seals are immutable'); END;
DROP TRIGGER security_audit_events_no_delete;
CREATE TRIGGER security_audit_events_no_delete BEFORE DELETE ON security_audit_events WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'security audit events are append-only'); END;
DROP TRIGGER trace_anchors_no_delete;
CREATE TRIGGER trace_anchors_no_delete BEFORE DELETE ON trace_anchors WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'trace anchors are append-only'); END;
DROP TRIGGER audit_receipts_no_delete;
CREATE TRIGGER audit_receipts_no_delete BEFORE DELETE ON audit_receipts WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'audit receipts are append-only'); END;
DROP TRIGGER step_run_mutations_no_delete;
CREATE TRIGGER step_run_mutations_no_delete BEFORE DELETE ON step_run_mutations WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'the mutation ledger is append-only'); END;
DROP TRIGGER tool_execution_start_barriers_no_delete;
CREATE TRIGGER tool_execution_start_barriers_no_delete BEFORE DELETE ON tool_execution_start_barriers WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'start barriers are immutable'); END;
DROP TRIGGER start_replay_identities_no_delete;
CREATE TRIGGER start_replay_identities_no_delete BEFORE DELETE ON start_replay_identities WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'replay identities are immutable'); END;
DROP TRIGGER invocation_plans_no_delete;
CREATE TRIGGER invocation_plans_no_delete BEFORE DELETE ON invocation_plans WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'an invocation plan is shredded, never deleted'); END;
