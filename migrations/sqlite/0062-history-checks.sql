-- R9.1 on SQLite: the same refusals as PostgreSQL's event trigger (pg-0036), as triggers, since
-- any process may open the file. The writer appends the events of a move first and then moves
-- the heads; each head move must be the image of the event just appended:
--   events: no gap (position = last + 1), opened by RunCreated, the five facts of a start
--     together and in order under one startId, each under the event id its fact names, the
--     barrier matching the StepRunStarted before it and committed only once its StepRun runs
--     that very attempt, a chain link present;
--   streams / runs: a head moves forward only, to the last position of its log;
--   step_runs: only by a transition the lifecycle allows (a completed StepRun never becomes
--     ready or running again), one version at a time, backed by the StepRun event just
--     appended, with its state JSON mirroring it; never deleted.
-- A process that drops these triggers gets past them: `verify` re-derives every head and link.

CREATE TRIGGER events_legal_append BEFORE INSERT ON events
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a chain link is required (R9.2)')
   WHERE NEW.chain_digest IS NULL OR length(NEW.chain_digest) <> 71 OR substr(NEW.chain_digest, 1, 7) <> 'sha256:';
  SELECT RAISE(ABORT, 'illegal history refused: the stream position leaves a gap (R9.1)')
   WHERE NEW.stream_position <> coalesce((SELECT max(e.stream_position) FROM events e WHERE e.stream_id = NEW.stream_id), 0) + 1;
  SELECT RAISE(ABORT, 'illegal history refused: a Run stream is opened by its RunCreated, once (R9.1)')
   WHERE (NEW.stream_position = 1) <> (NEW.event_type = 'RunCreated')
      OR (NEW.event_type = 'RunCreated' AND NEW.stream_id <> 'run-' || json_extract(NEW.data_json, '$.runId'));
  SELECT RAISE(ABORT, 'illegal history refused: the five facts of a start go together, in order, under one startId (R9.1)')
    FROM (SELECT (SELECT p.event_type FROM events p WHERE p.stream_id = NEW.stream_id AND p.stream_position = NEW.stream_position - 1) AS prev_type,
                 (SELECT json_extract(p.data_json, '$.startId') FROM events p WHERE p.stream_id = NEW.stream_id AND p.stream_position = NEW.stream_position - 1) AS prev_start,
                 coalesce(json_extract(NEW.data_json, '$.startId'), json_extract(NEW.data_json, '$.barrier.startId')) AS start_id) x
   WHERE CASE x.prev_type
           WHEN 'SecurityAuditEventRecorded' THEN NEW.event_type <> 'TraceAnchorRecorded' OR x.start_id IS NOT x.prev_start
           WHEN 'TraceAnchorRecorded' THEN NEW.event_type <> 'AuditReceiptIssued' OR x.start_id IS NOT x.prev_start
           WHEN 'AuditReceiptIssued' THEN NEW.event_type <> 'StepRunStarted' OR x.start_id IS NOT x.prev_start
           WHEN 'StepRunStarted' THEN NEW.event_type <> 'ToolExecutionStartBarrierCommitted' OR x.start_id IS NOT x.prev_start
           ELSE NEW.event_type IN ('TraceAnchorRecorded', 'AuditReceiptIssued', 'StepRunStarted', 'ToolExecutionStartBarrierCommitted')
         END;
  SELECT RAISE(ABORT, 'illegal history refused: the event id is not the one its fact names (R9.1)')
   WHERE NEW.event_id IS NOT CASE NEW.event_type
           WHEN 'SecurityAuditEventRecorded' THEN 'audit:' || json_extract(NEW.data_json, '$.auditEventId')
           WHEN 'TraceAnchorRecorded' THEN 'trace:' || json_extract(NEW.data_json, '$.traceId')
           WHEN 'AuditReceiptIssued' THEN 'receipt:' || json_extract(NEW.data_json, '$.auditReceiptId')
           WHEN 'StepRunStarted' THEN json_extract(NEW.data_json, '$.runEventId')
           WHEN 'ToolExecutionStartBarrierCommitted' THEN 'barrier:' || json_extract(NEW.data_json, '$.barrier.startId')
           ELSE NEW.event_id END;
  SELECT RAISE(ABORT, 'illegal history refused: the barrier does not match the StepRunStarted before it (R9.1)')
    FROM events p
   WHERE NEW.event_type = 'ToolExecutionStartBarrierCommitted' AND p.stream_id = NEW.stream_id AND p.stream_position = NEW.stream_position - 1
     AND (json_extract(NEW.data_json, '$.barrier.runId') IS NOT json_extract(p.data_json, '$.runId')
       OR json_extract(NEW.data_json, '$.barrier.stepRunId') IS NOT json_extract(p.data_json, '$.stepRunId')
       OR json_extract(NEW.data_json, '$.barrier.attempt.fromStatus') IS NOT json_extract(p.data_json, '$.fromStatus')
       OR json_extract(NEW.data_json, '$.barrier.attempt.fromStepRunVersion') IS NOT json_extract(p.data_json, '$.fromStepRunVersion')
       OR json_extract(NEW.data_json, '$.barrier.attempt.fromStepRunDigest') IS NOT json_extract(p.data_json, '$.fromStepRunDigest')
       OR json_extract(NEW.data_json, '$.barrier.attempt.startedStepRunVersion') IS NOT json_extract(p.data_json, '$.stepRunVersion')
       OR json_extract(NEW.data_json, '$.barrier.attempt.startedStepRunDigest') IS NOT json_extract(p.data_json, '$.startedStepRunDigest')
       OR json_extract(NEW.data_json, '$.barrier.mutation.mutationId') IS NOT json_extract(p.data_json, '$.mutationId')
       OR json_extract(NEW.data_json, '$.barrier.mutation.mutationDigest') IS NOT json_extract(p.data_json, '$.mutationDigest')
       OR json_extract(NEW.data_json, '$.barrier.runEvent.runEventId') IS NOT json_extract(p.data_json, '$.runEventId')
       OR json_extract(NEW.data_json, '$.barrier.runEvent.runEventSequence') IS NOT json_extract(p.data_json, '$.runEventSequence'));
  -- the StepRun move is made before the barrier is committed: its head runs this very attempt
  SELECT RAISE(ABORT, 'illegal history refused: a barrier whose StepRun did not move to running for it (R9.1)')
   WHERE NEW.event_type = 'ToolExecutionStartBarrierCommitted'
     AND NOT EXISTS (SELECT 1 FROM step_runs h
                      WHERE h.run_id = json_extract(NEW.data_json, '$.barrier.runId') AND h.step_run_id = json_extract(NEW.data_json, '$.barrier.stepRunId')
                        AND h.status = 'running' AND h.version = json_extract(NEW.data_json, '$.barrier.attempt.startedStepRunVersion')
                        AND h.digest = json_extract(NEW.data_json, '$.barrier.attempt.startedStepRunDigest')
                        AND json_extract(h.state_json, '$.lastStartId') = json_extract(NEW.data_json, '$.barrier.startId'));
END;

CREATE TRIGGER streams_legal_move BEFORE UPDATE ON streams
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a stream head moves forward to the last position of its log (R9.1)')
   WHERE NEW.stream_id IS NOT OLD.stream_id OR NEW.stream_type IS NOT OLD.stream_type OR NEW.version <= OLD.version
      OR NEW.version IS NOT (SELECT max(e.stream_position) FROM events e WHERE e.stream_id = NEW.stream_id);
END;
CREATE TRIGGER streams_no_delete BEFORE DELETE ON streams
BEGIN SELECT RAISE(ABORT, 'illegal history refused: a stream head is never deleted (R9.1)'); END;

CREATE TRIGGER runs_legal_move BEFORE UPDATE ON runs
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a Run head moves forward to the last position of its log, nothing else changes (R9.1)')
   WHERE NEW.run_id IS NOT OLD.run_id OR NEW.project_id IS NOT OLD.project_id OR NEW.snapshot_id IS NOT OLD.snapshot_id
      OR NEW.snapshot_digest IS NOT OLD.snapshot_digest OR NEW.version <= OLD.version
      OR NEW.version IS NOT (SELECT max(e.stream_position) FROM events e WHERE e.stream_id = 'run-' || NEW.run_id);
END;
CREATE TRIGGER runs_no_delete BEFORE DELETE ON runs
BEGIN SELECT RAISE(ABORT, 'illegal history refused: a Run head is never deleted (R9.1)'); END;

CREATE TRIGGER step_runs_legal_move BEFORE UPDATE ON step_runs
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a StepRun moves one version at a time, by a transition the lifecycle allows (R9.1)')
   WHERE NEW.run_id IS NOT OLD.run_id OR NEW.step_run_id IS NOT OLD.step_run_id OR NEW.project_id IS NOT OLD.project_id
      OR NEW.kind IS NOT OLD.kind OR NEW.version IS NOT OLD.version + 1
      OR (OLD.status || '>' || NEW.status) NOT IN ('created>ready', 'lost>ready', 'created>waiting_approval', 'lost>waiting_approval',
            'ready>running', 'waiting_approval>running', 'running>lost', 'running>completed', 'running>failed')
      OR json_extract(NEW.state_json, '$.status') IS NOT NEW.status OR json_extract(NEW.state_json, '$.version') IS NOT NEW.version
      OR json_extract(NEW.state_json, '$.runId') IS NOT NEW.run_id OR json_extract(NEW.state_json, '$.stepRunId') IS NOT NEW.step_run_id
      OR json_extract(NEW.state_json, '$.projectId') IS NOT NEW.project_id OR json_extract(NEW.state_json, '$.kind') IS NOT NEW.kind
      OR json_extract(NEW.state_json, '$.toolDefinition') IS NOT json_extract(OLD.state_json, '$.toolDefinition');
  -- the StepRun event just appended (the last of its stream) is this very move
  SELECT RAISE(ABORT, 'illegal history refused: a StepRun move without its event (R9.1)')
    FROM (SELECT e.event_type, e.data_json FROM events e
           WHERE e.stream_id = 'run-' || NEW.run_id ORDER BY e.stream_position DESC LIMIT 1) last
   WHERE last.event_type IS NOT CASE NEW.status WHEN 'ready' THEN 'StepRunReady' WHEN 'waiting_approval' THEN 'StepRunAwaitingApproval'
           WHEN 'running' THEN 'StepRunStarted' WHEN 'lost' THEN 'StepRunLost' WHEN 'completed' THEN 'StepRunCompleted' WHEN 'failed' THEN 'StepRunFailed' END
      OR json_extract(last.data_json, '$.stepRunId') IS NOT NEW.step_run_id
      OR json_extract(last.data_json, '$.stepRunVersion') IS NOT NEW.version
      OR (NEW.status = 'waiting_approval' AND json_extract(last.data_json, '$.approval') IS NOT json_extract(NEW.state_json, '$.approval'))
      OR (NEW.status = 'running' AND (json_extract(last.data_json, '$.startedStepRunDigest') IS NOT NEW.digest
            OR json_extract(last.data_json, '$.fromStepRunDigest') IS NOT OLD.digest
            OR json_extract(last.data_json, '$.fromStatus') IS NOT OLD.status
            OR json_extract(last.data_json, '$.startId') IS NOT json_extract(NEW.state_json, '$.lastStartId')))
      OR (NEW.status IN ('lost', 'completed', 'failed') AND json_extract(last.data_json, '$.startId') IS NOT json_extract(OLD.state_json, '$.lastStartId'));
  SELECT RAISE(ABORT, 'illegal history refused: a StepRun move without its event (R9.1)')
   WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.stream_id = 'run-' || NEW.run_id);
END;
CREATE TRIGGER step_runs_no_delete BEFORE DELETE ON step_runs
BEGIN SELECT RAISE(ABORT, 'illegal history refused: a StepRun is never deleted (R9.1)'); END;
