-- R9.1: a fact row goes in only beside its own event. A start writes its audit event, trace
-- anchor and receipt rows just after their three events, and its StepRun move just after its
-- StepRunStarted (infrastructure/sqlite/writes.ts). Any process that opens the file could also
-- insert one more row naming a committed start under an id no event has: an audit table
-- holding an audit event that never happened, which every read of the start passed by and
-- `verify` did not see (it asked only whether the start had a barrier). Now the database
-- refuses it: the row's own event (its id, its type, its Run) must be in the log and name the
-- same start, and a mutation row the same mutation. Rows stored before are not re-read:
-- `verify` reports one that its start's barrier does not name.
CREATE TRIGGER security_audit_events_beside_their_event BEFORE INSERT ON security_audit_events
  WHEN NOT EXISTS (
    SELECT 1 FROM events e
     WHERE e.event_id = 'audit:' || NEW.audit_event_id AND e.event_type = 'SecurityAuditEventRecorded'
       AND e.stream_id = 'run-' || NEW.run_id AND json_extract(e.data_json, '$.startId') IS NEW.start_id)
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a security audit event row has no event of its own in the log (R9.1)');
END;

CREATE TRIGGER trace_anchors_beside_their_event BEFORE INSERT ON trace_anchors
  WHEN NOT EXISTS (
    SELECT 1 FROM events e
     WHERE e.event_id = 'trace:' || NEW.trace_id AND e.event_type = 'TraceAnchorRecorded'
       AND e.stream_id = 'run-' || NEW.run_id AND json_extract(e.data_json, '$.startId') IS NEW.start_id)
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a trace anchor row has no event of its own in the log (R9.1)');
END;

CREATE TRIGGER audit_receipts_beside_their_event BEFORE INSERT ON audit_receipts
  WHEN NOT EXISTS (
    SELECT 1 FROM events e
     WHERE e.event_id = 'receipt:' || NEW.audit_receipt_id AND e.event_type = 'AuditReceiptIssued'
       AND json_extract(e.data_json, '$.startId') IS NEW.start_id)
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: an audit receipt row has no event of its own in the log (R9.1)');
END;

CREATE TRIGGER step_run_mutations_beside_their_event BEFORE INSERT ON step_run_mutations
  WHEN NOT EXISTS (
    SELECT 1 FROM events e
     WHERE e.event_id = NEW.run_event_id AND e.event_type = 'StepRunStarted'
       AND e.stream_id = 'run-' || NEW.run_id AND json_extract(e.data_json, '$.startId') IS NEW.start_id
       AND json_extract(e.data_json, '$.mutationId') IS NEW.mutation_id)
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a StepRun mutation row has no event of its own in the log (R9.1)');
END;
