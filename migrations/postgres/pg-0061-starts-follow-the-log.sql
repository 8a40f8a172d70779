-- R9.1: a start authorises what the Run's log made, not what a head row says. A start is
-- decided on the Run and StepRun heads, and the event trigger checks each event against those
-- heads; a head rewritten by the owner past the triggers, its digest recomputed (its tool
-- definition, its approval, its Run's Project or snapshot), was then what a start committed,
-- keyed or not. Now the barrier event must agree with the log itself: its Project and snapshot
-- with the Run's RunCreated, its StepRun's kind and tool definition with that StepRun's
-- StepRunCreated, and its approval with the move the StepRun started from (the
-- StepRunAwaitingApproval's, none after a StepRunReady). Each is one probe of an index the log
-- already has (the stream position, the StepRun version index of pg-0056: each probe repeats
-- that partial index's event-type list, so the planner may use it), once per start.
-- Starts stored before are not re-read. The SQLite twin is 0089.
SET LOCAL ROLE ql3_owner;

CREATE FUNCTION ql3.start_follows_log() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  b jsonb := NEW.data_json::jsonb -> 'barrier';
BEGIN
  IF NOT EXISTS (
       SELECT 1 FROM ql3.events r
        WHERE r.stream_id = NEW.stream_id AND r.stream_position = 1 AND r.event_type = 'RunCreated'
          AND r.data_json::jsonb ->> 'projectId' IS NOT DISTINCT FROM b ->> 'projectId'
          AND r.data_json::jsonb ->> 'snapshotId' IS NOT DISTINCT FROM b ->> 'snapshotId'
          AND r.data_json::jsonb ->> 'snapshotDigest' IS NOT DISTINCT FROM b ->> 'snapshotDigest')
     OR NOT EXISTS (
       SELECT 1 FROM ql3.events c
        WHERE c.stream_id = NEW.stream_id
          AND (c.data_json::json ->> 'stepRunId') = b ->> 'stepRunId'
          AND ((c.data_json::json ->> 'stepRunVersion')::bigint) = 1
          AND c.event_type IN ('StepRunCreated', 'StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed')
          AND c.event_type = 'StepRunCreated'
          AND c.data_json::jsonb ->> 'kind' = 'tool'
          AND c.data_json::jsonb -> 'toolDefinition' IS NOT DISTINCT FROM b -> 'toolDefinition')
     OR NOT EXISTS (
       SELECT 1 FROM ql3.events m
        WHERE m.stream_id = NEW.stream_id
          AND (m.data_json::json ->> 'stepRunId') = b ->> 'stepRunId'
          AND ((m.data_json::json ->> 'stepRunVersion')::bigint) = (b #>> '{attempt,fromStepRunVersion}')::bigint
          AND m.event_type IN ('StepRunCreated', 'StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed')
          AND m.event_type IN ('StepRunReady', 'StepRunAwaitingApproval')
          AND m.data_json::jsonb -> 'approval' IS NOT DISTINCT FROM b -> 'approval') THEN
    PERFORM ql3.refuse_history(format('start %s authorises what the Run''s log made: its Project, snapshot, tool definition and approval', b ->> 'startId'));
  END IF;
  RETURN NEW;
END
$fn$;
REVOKE ALL ON FUNCTION ql3.start_follows_log() FROM PUBLIC;

CREATE TRIGGER events_start_follows_log BEFORE INSERT ON ql3.events
  FOR EACH ROW WHEN (NEW.event_type = 'ToolExecutionStartBarrierCommitted') EXECUTE FUNCTION ql3.start_follows_log();
