-- R9.1: a start is whole at COMMIT. SQLite has no deferred triggers, but it has deferred foreign
-- keys: the first fact of a start, and every fact row, records its startId here, and the row's
-- deferred reference to the barrier makes COMMIT fail unless the barrier (which references the
-- StepRun move, and whose event follows StepRunStarted, 0062) exists by then. Needs
-- `foreign_keys = ON`, which the authority sets; `verify` covers a process that does not.
CREATE TABLE start_whole_at_commit (
  start_id TEXT NOT NULL PRIMARY KEY REFERENCES tool_execution_start_barriers (start_id) DEFERRABLE INITIALLY DEFERRED
) STRICT;

CREATE TRIGGER events_start_whole AFTER INSERT ON events WHEN NEW.event_type = 'SecurityAuditEventRecorded'
BEGIN INSERT OR IGNORE INTO start_whole_at_commit (start_id) VALUES (json_extract(NEW.data_json, '$.startId')); END;
CREATE TRIGGER security_audit_events_start_whole AFTER INSERT ON security_audit_events
BEGIN INSERT OR IGNORE INTO start_whole_at_commit (start_id) VALUES (NEW.start_id); END;
CREATE TRIGGER trace_anchors_start_whole AFTER INSERT ON trace_anchors
BEGIN INSERT OR IGNORE INTO start_whole_at_commit (start_id) VALUES (NEW.start_id); END;
CREATE TRIGGER audit_receipts_start_whole AFTER INSERT ON audit_receipts
BEGIN INSERT OR IGNORE INTO start_whole_at_commit (start_id) VALUES (NEW.start_id); END;
CREATE TRIGGER step_run_mutations_start_whole AFTER INSERT ON step_run_mutations
BEGIN INSERT OR IGNORE INTO start_whole_at_commit (start_id) VALUES (NEW.start_id); END;

-- the barrier row comes with its own event (inserted just before it)
CREATE TRIGGER tool_execution_start_barriers_with_event BEFORE INSERT ON tool_execution_start_barriers
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a barrier row without its barrier event (R9.1)')
   WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.event_id = 'barrier:' || NEW.start_id
                       AND json_extract(e.data_json, '$.barrierDigest') = NEW.barrier_digest);
END;

-- existing starts are whole already
INSERT INTO start_whole_at_commit (start_id) SELECT start_id FROM tool_execution_start_barriers;
