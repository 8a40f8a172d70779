-- R9.1, R4.1: the replay index holds what its barriers hold and nothing else. Its seven rows per
-- start were inserted by the writer beside the barrier, and any process on the file could add
-- one more: a fresh value naming an existing start (a "stray"). `verify` reported it and a
-- lookup of that value failed closed, but the database kept it, and a later command using the
-- value was refused as a semantic conflict. Now:
--   * the barrier's own insert writes its seven rows, each value read from the barrier's mirror
--     columns (the attempt as the canonical JSON of its run, StepRun and started version: ids
--     are of [A-Za-z0-9._-], so json_array prints them as the product does); the writer no
--     longer sends them;
--   * a row goes in only when it is one of those seven: its value is the one its barrier holds
--     under its identity. A stray is refused; a second row under a held value meets the
--     primary key as before.
-- Data moved forward: none. A stray written before this migration stays, and `verify` reports
-- it as before. The PostgreSQL twin is pg-0059.
CREATE TRIGGER start_replay_identities_from_barrier BEFORE INSERT ON start_replay_identities
  WHEN NOT EXISTS (
    SELECT 1 FROM tool_execution_start_barriers b
     WHERE b.start_id = NEW.start_id
       AND NEW.value IS (CASE NEW.identity
         WHEN 'startId' THEN b.start_id
         WHEN 'mutationId' THEN b.mutation_id
         WHEN 'runEventId' THEN b.run_event_id
         WHEN 'traceId' THEN b.trace_id
         WHEN 'auditEventId' THEN b.audit_event_id
         WHEN 'auditReceiptId' THEN b.audit_receipt_id
         WHEN 'attempt' THEN json_array(b.run_id, b.step_run_id, b.started_step_run_version) END))
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a replay identity is a value its barrier holds (R4.1, R9.1)');
END;

CREATE TRIGGER tool_execution_start_barriers_index AFTER INSERT ON tool_execution_start_barriers
BEGIN
  INSERT INTO start_replay_identities (identity, value, start_id) VALUES
    ('startId', NEW.start_id, NEW.start_id),
    ('mutationId', NEW.mutation_id, NEW.start_id),
    ('runEventId', NEW.run_event_id, NEW.start_id),
    ('traceId', NEW.trace_id, NEW.start_id),
    ('auditEventId', NEW.audit_event_id, NEW.start_id),
    ('auditReceiptId', NEW.audit_receipt_id, NEW.start_id),
    ('attempt', json_array(NEW.run_id, NEW.step_run_id, NEW.started_step_run_version), NEW.start_id);
END;
