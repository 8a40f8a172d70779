-- R9.1 on SQLite: a StepRun event is checked against the StepRun head when it is appended, as
-- PostgreSQL's event trigger does (pg-0036). 0062 checks each head move against the event just
-- appended, so a process that appends an event and leaves the head where it was (a completed
-- StepRun "made ready again" by its StepRunReady alone) got past it and only `verify` saw it.
-- The writer moves the heads event by event (infrastructure/sqlite/writes.ts), so when an event
-- is inserted its StepRun head is always the state that event starts from:
--   StepRunCreated: no head yet, version 1;
--   every other StepRun event: the head at version - 1, by a transition the lifecycle allows
--     (the same list as step_runs_legal_move), in the stream of its own Run.
CREATE TRIGGER events_step_run_from_head BEFORE INSERT ON events
  WHEN NEW.event_type IN ('StepRunCreated', 'StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed')
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a StepRun event names the Run of its stream (R9.1)')
   WHERE NEW.stream_id IS NOT 'run-' || json_extract(NEW.data_json, '$.runId');
  SELECT RAISE(ABORT, 'illegal history refused: a StepRun is created once, at version 1 (R9.1)')
   WHERE NEW.event_type = 'StepRunCreated'
     AND (json_extract(NEW.data_json, '$.stepRunVersion') IS NOT 1
       OR EXISTS (SELECT 1 FROM step_runs h WHERE h.run_id = json_extract(NEW.data_json, '$.runId') AND h.step_run_id = json_extract(NEW.data_json, '$.stepRunId')));
  SELECT RAISE(ABORT, 'illegal history refused: a StepRun event moves its head one version, by a transition the lifecycle allows (R9.1)')
   WHERE NEW.event_type <> 'StepRunCreated'
     AND NOT EXISTS (SELECT 1 FROM step_runs h
                      WHERE h.run_id = json_extract(NEW.data_json, '$.runId') AND h.step_run_id = json_extract(NEW.data_json, '$.stepRunId')
                        AND h.version = json_extract(NEW.data_json, '$.stepRunVersion') - 1
                        AND (h.status || '>' || CASE NEW.event_type WHEN 'StepRunReady' THEN 'ready' WHEN 'StepRunAwaitingApproval' THEN 'waiting_approval'
                               WHEN 'StepRunStarted' THEN 'running' WHEN 'StepRunLost' THEN 'lost' WHEN 'StepRunCompleted' THEN 'completed' WHEN 'StepRunFailed' THEN 'failed' END)
                            IN ('created>ready', 'lost>ready', 'created>waiting_approval', 'lost>waiting_approval',
                                'ready>running', 'waiting_approval>running', 'running>lost', 'running>completed', 'running>failed'));
END;
