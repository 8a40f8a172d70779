-- R9.1: a start authorises what the Run's log made, not what a head row says. A start is
-- decided on the Run and StepRun heads, and the triggers check each event against those heads;
-- a head rewritten past the triggers with its digest recomputed (its tool definition, its
-- approval, its Run's Project or snapshot) was then what a start committed, keyed or not. Now
-- the barrier event must agree with the log itself: its Project and snapshot with the Run's
-- RunCreated, its StepRun's kind and tool definition with that StepRun's StepRunCreated, and
-- its approval with the move the StepRun started from (the StepRunAwaitingApproval's, none
-- after a StepRunReady). Each is one probe of an index the log already has (the stream
-- position, the StepRun version index of 0084: each probe repeats that partial index's event-type
-- list, so the planner may use it). Starts stored before are not re-read.
CREATE TRIGGER events_start_follows_log BEFORE INSERT ON events
  WHEN NEW.event_type = 'ToolExecutionStartBarrierCommitted' AND NOT (
    EXISTS (
      SELECT 1 FROM events r
       WHERE r.stream_id = NEW.stream_id AND r.stream_position = 1 AND r.event_type = 'RunCreated'
         AND json_extract(r.data_json, '$.projectId') IS json_extract(NEW.data_json, '$.barrier.projectId')
         AND json_extract(r.data_json, '$.snapshotId') IS json_extract(NEW.data_json, '$.barrier.snapshotId')
         AND json_extract(r.data_json, '$.snapshotDigest') IS json_extract(NEW.data_json, '$.barrier.snapshotDigest'))
    AND EXISTS (
      SELECT 1 FROM events c
       WHERE c.stream_id = NEW.stream_id
         AND json_extract(c.data_json, '$.stepRunId') = json_extract(NEW.data_json, '$.barrier.stepRunId')
         AND json_extract(c.data_json, '$.stepRunVersion') = 1
         AND c.event_type IN ('StepRunCreated', 'StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed')
         AND c.event_type = 'StepRunCreated'
         AND json_extract(c.data_json, '$.kind') = 'tool'
         AND json_extract(c.data_json, '$.toolDefinition') IS json_extract(NEW.data_json, '$.barrier.toolDefinition'))
    AND EXISTS (
      SELECT 1 FROM events m
       WHERE m.stream_id = NEW.stream_id
         AND json_extract(m.data_json, '$.stepRunId') = json_extract(NEW.data_json, '$.barrier.stepRunId')
         AND json_extract(m.data_json, '$.stepRunVersion') = json_extract(NEW.data_json, '$.barrier.attempt.fromStepRunVersion')
         AND m.event_type IN ('StepRunCreated', 'StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed')
         AND m.event_type IN ('StepRunReady', 'StepRunAwaitingApproval')
         AND json_extract(m.data_json, '$.approval') IS json_extract(NEW.data_json, '$.barrier.approval')))
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a start authorises what the Run''s log made: its Project, snapshot, tool definition and approval (R9.1)');
END;
