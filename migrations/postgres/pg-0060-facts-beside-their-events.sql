-- R9.1: a fact row goes in only beside its own event. A start's statement inserts the audit
-- event, trace anchor and receipt rows after their three events, and its StepRun move after its
-- StepRunStarted (infrastructure/postgres/sql.ts; a row trigger sees the rows its statement
-- inserted before it). With the INSERT it needs for that, the runtime could also insert one
-- more row naming a committed start under an id no event has: an audit table holding an audit
-- event that never happened, which every read of the start passed by and `verify` did not see
-- (it asked only whether the start had a barrier). Now the database refuses it: the row's own
-- event (its id, its type, its Run) must be in the log and name the same start, and a mutation
-- row the same mutation. Rows stored before are not re-read: `verify` reports one that its
-- start's barrier does not name. The SQLite twin is 0088.
SET LOCAL ROLE ql3_owner;

CREATE FUNCTION ql3.fact_beside_its_event() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  found boolean;
BEGIN
  CASE TG_TABLE_NAME
    WHEN 'security_audit_events' THEN
      SELECT true INTO found FROM ql3.events e
       WHERE e.event_id = 'audit:' || NEW.audit_event_id AND e.event_type = 'SecurityAuditEventRecorded'
         AND e.stream_id = 'run-' || NEW.run_id AND e.data_json::json ->> 'startId' IS NOT DISTINCT FROM NEW.start_id;
    WHEN 'trace_anchors' THEN
      SELECT true INTO found FROM ql3.events e
       WHERE e.event_id = 'trace:' || NEW.trace_id AND e.event_type = 'TraceAnchorRecorded'
         AND e.stream_id = 'run-' || NEW.run_id AND e.data_json::json ->> 'startId' IS NOT DISTINCT FROM NEW.start_id;
    WHEN 'audit_receipts' THEN
      SELECT true INTO found FROM ql3.events e
       WHERE e.event_id = 'receipt:' || NEW.audit_receipt_id AND e.event_type = 'AuditReceiptIssued'
         AND e.data_json::json ->> 'startId' IS NOT DISTINCT FROM NEW.start_id;
    WHEN 'step_run_mutations' THEN
      SELECT true INTO found FROM ql3.events e
       WHERE e.event_id = NEW.run_event_id AND e.event_type = 'StepRunStarted'
         AND e.stream_id = 'run-' || NEW.run_id AND e.data_json::json ->> 'startId' IS NOT DISTINCT FROM NEW.start_id
         AND e.data_json::json ->> 'mutationId' IS NOT DISTINCT FROM NEW.mutation_id;
  END CASE;
  IF found IS NOT TRUE THEN
    PERFORM ql3.refuse_history(format('a %s row of start %s has no event of its own in the log', TG_TABLE_NAME, NEW.start_id));
  END IF;
  RETURN NEW;
END
$fn$;
REVOKE ALL ON FUNCTION ql3.fact_beside_its_event() FROM PUBLIC;

CREATE TRIGGER security_audit_events_beside_their_event BEFORE INSERT ON ql3.security_audit_events
  FOR EACH ROW EXECUTE FUNCTION ql3.fact_beside_its_event();
CREATE TRIGGER trace_anchors_beside_their_event BEFORE INSERT ON ql3.trace_anchors
  FOR EACH ROW EXECUTE FUNCTION ql3.fact_beside_its_event();
CREATE TRIGGER audit_receipts_beside_their_event BEFORE INSERT ON ql3.audit_receipts
  FOR EACH ROW EXECUTE FUNCTION ql3.fact_beside_its_event();
CREATE TRIGGER step_run_mutations_beside_their_event BEFORE INSERT ON ql3.step_run_mutations
  FOR EACH ROW EXECUTE FUNCTION ql3.fact_beside_its_event();
