-- R9.1: a StepRun event follows its StepRun's log, not only its head. 0072 checks each StepRun
-- event against the StepRun head row; the head is a projection, so a head rewritten from
-- outside (triggers dropped, its plain digest recomputed, triggers put back) made a completed
-- StepRun look ready and the next start was committed on it. The log now decides as well:
--   * a StepRun version is in the log once: the unique index below, on the StepRun id and
--     version each StepRun event carries in its data (a head set back to an earlier version
--     makes the next event repeat a version the log has; the adapter reports that refusal as
--     CORRUPT_RECORD, never as a replay);
--   * every StepRun event after StepRunCreated follows the StepRun's own last event in the
--     log, at version - 1, by a move the lifecycle allows (a head whose status was rewritten
--     at the same version names a move its log refuses), and an outcome names the start of
--     the StepRunStarted it follows.
-- The probe is one seek in that index; it holds the StepRun events only.
--
-- Data moved forward: none to move. Building the index refuses a store whose log already
-- repeats a StepRun version (the migration fails on it and changes nothing).

CREATE UNIQUE INDEX events_step_run_version ON events (stream_id, json_extract(data_json, '$.stepRunId'), json_extract(data_json, '$.stepRunVersion'))
  WHERE event_type IN ('StepRunCreated', 'StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed');

CREATE TRIGGER events_step_run_follows_log BEFORE INSERT ON events
  WHEN NEW.event_type IN ('StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed')
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a StepRun event follows the last event of its StepRun in the log, by a move the lifecycle allows; the StepRun head is not where its log ends (R9.1)')
   WHERE NOT EXISTS (
           SELECT 1 FROM events p
            WHERE p.stream_id = NEW.stream_id
              AND p.event_type IN ('StepRunCreated', 'StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed')
              AND json_extract(p.data_json, '$.stepRunId') = json_extract(NEW.data_json, '$.stepRunId')
              AND json_extract(p.data_json, '$.stepRunVersion') = json_extract(NEW.data_json, '$.stepRunVersion') - 1
              AND (p.event_type || '>' || NEW.event_type) IN (
                    'StepRunCreated>StepRunReady', 'StepRunLost>StepRunReady', 'StepRunCreated>StepRunAwaitingApproval', 'StepRunLost>StepRunAwaitingApproval',
                    'StepRunReady>StepRunStarted', 'StepRunAwaitingApproval>StepRunStarted',
                    'StepRunStarted>StepRunLost', 'StepRunStarted>StepRunCompleted', 'StepRunStarted>StepRunFailed')
              AND (NEW.event_type NOT IN ('StepRunLost', 'StepRunCompleted', 'StepRunFailed')
                   OR json_extract(p.data_json, '$.startId') IS json_extract(NEW.data_json, '$.startId')));
END;
