-- R9.1: a StepRun event follows its StepRun's log, not only its head (as SQLite's 0084). The
-- event trigger (pg-0036, pg-0055) checks each StepRun event against the StepRun head row and
-- derives the next head from it; the head is a projection, so an owner who rewrote a head row
-- (a completed StepRun made ready again, its digest recomputed) had the next start committed
-- on it. The log now decides as well:
--   * a StepRun version is in the log once: the unique index below, on the StepRun id and
--     version each StepRun event carries (a head set back to an earlier version makes the next
--     event repeat a version the log has: 23505 on this index, which the adapter reports as
--     CORRUPT_RECORD, never as a replay or a lost race);
--   * every lifecycle move (a StepRun event after StepRunCreated other than StepRunStarted)
--     follows the StepRun's own last event in the log, at version - 1, by a move the lifecycle
--     allows, and an outcome names the start of the StepRunStarted it follows (a head whose
--     status was rewritten at the same version names a move its log refuses).
-- A start is checked the same way on the read it is decided on (the StepRun's last event comes
-- back with its head, outside the transaction: infrastructure/postgres/sql.ts READ_START), not
-- here: under SERIALIZABLE a probe of this index inside the write would be a predicate lock on
-- a page that starts of other Runs insert into, and they would fail each other. The unique
-- index still refuses a start that repeats a version. Only the owner can rewrite a head at all
-- (the runtime has no UPDATE on it, pg-0038). The index holds the StepRun events only; json,
-- not jsonb: the two fields are read without building a tree.
--
-- Data moved forward: none to move. Building the index refuses a store whose log already
-- repeats a StepRun version (the migration fails on it and changes nothing).
SET LOCAL ROLE ql3_owner;

CREATE UNIQUE INDEX events_step_run_version_key ON ql3.events
  (stream_id, (data_json::json ->> 'stepRunId'), ((data_json::json ->> 'stepRunVersion')::bigint))
  WHERE event_type IN ('StepRunCreated', 'StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed');

CREATE FUNCTION ql3.step_run_event_follows_log() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  d json := NEW.data_json::json;
  prev record;
BEGIN
  SELECT e.event_type, e.data_json::json ->> 'startId' AS start_id INTO prev FROM ql3.events e
   WHERE e.stream_id = NEW.stream_id
     AND e.event_type IN ('StepRunCreated', 'StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed')
     AND (e.data_json::json ->> 'stepRunId') = (d ->> 'stepRunId')
     AND ((e.data_json::json ->> 'stepRunVersion')::bigint) = (d ->> 'stepRunVersion')::bigint - 1;
  IF NOT FOUND OR NOT (prev.event_type || '>' || NEW.event_type) = ANY (ARRAY[
       'StepRunCreated>StepRunReady', 'StepRunLost>StepRunReady', 'StepRunCreated>StepRunAwaitingApproval', 'StepRunLost>StepRunAwaitingApproval',
       'StepRunStarted>StepRunLost', 'StepRunStarted>StepRunCompleted', 'StepRunStarted>StepRunFailed'])
     OR (NEW.event_type IN ('StepRunLost', 'StepRunCompleted', 'StepRunFailed') AND prev.start_id IS DISTINCT FROM d ->> 'startId') THEN
    PERFORM ql3.refuse_history(format('%s@%s: %s of StepRun %s at version %s does not follow its last event in the log (%s); the StepRun head is not where its log ends',
      NEW.stream_id, NEW.stream_position, NEW.event_type, d ->> 'stepRunId', d ->> 'stepRunVersion', coalesce(prev.event_type, 'none')));
  END IF;
  RETURN NEW;
END
$fn$;
REVOKE ALL ON FUNCTION ql3.step_run_event_follows_log() FROM PUBLIC;

CREATE TRIGGER events_step_run_follows_log BEFORE INSERT ON ql3.events
  FOR EACH ROW WHEN (NEW.event_type IN ('StepRunReady', 'StepRunAwaitingApproval', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed'))
  EXECUTE FUNCTION ql3.step_run_event_follows_log();
