-- R9.1, R4.1: the replay index holds what its barriers hold and nothing else. The runtime
-- inserted a start's seven index rows beside its barrier, and with that right it could insert
-- one more: a fresh value naming an existing start (a "stray"). `verify` reported it and a
-- lookup of that value failed closed, but the database kept it, and a later command using the
-- value was refused as a semantic conflict. Now the barrier's own insert writes its seven rows,
-- as the owner, each value read from the barrier's mirror columns (the attempt as the canonical
-- JSON of its run, StepRun and started version: ids are of [A-Za-z0-9._-], so this prints them
-- as the product does), and the runtime has no INSERT on the index: SELECT only. A second row
-- under a held value still meets start_replay_identities_key (23505), which a racing start reads
-- as before. The trigger runs once per start, in the statement that inserts the barrier.
-- Data moved forward: none. A stray written before this migration stays, and `verify` reports
-- it as before. The SQLite twin is 0087.
SET LOCAL ROLE ql3_owner;

CREATE FUNCTION ql3.index_start_barrier() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  INSERT INTO ql3.start_replay_identities (identity, value, start_id) VALUES
    ('startId', NEW.start_id, NEW.start_id),
    ('mutationId', NEW.mutation_id, NEW.start_id),
    ('runEventId', NEW.run_event_id, NEW.start_id),
    ('traceId', NEW.trace_id, NEW.start_id),
    ('auditEventId', NEW.audit_event_id, NEW.start_id),
    ('auditReceiptId', NEW.audit_receipt_id, NEW.start_id),
    ('attempt', '[' || to_json(NEW.run_id)::text || ',' || to_json(NEW.step_run_id)::text || ',' || NEW.started_step_run_version::text || ']', NEW.start_id);
  RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION ql3.index_start_barrier() FROM PUBLIC;

CREATE TRIGGER tool_execution_start_barriers_index AFTER INSERT ON ql3.tool_execution_start_barriers
  FOR EACH ROW EXECUTE FUNCTION ql3.index_start_barrier();

REVOKE INSERT ON ql3.start_replay_identities FROM ql3_runtime;
