-- R9.1: a start_outcomes row goes in only as the projection of its outcome event. The row is
-- written by events_project_start_outcome (0058) in the statement that appends the
-- StepRunCompleted / StepRunFailed / StepRunLost event; any process that opens the file could
-- also insert one directly, and a row naming a running start takes that start off the in-doubt
-- list until a read compares it with its event (every read does, and fails closed). Now the
-- database refuses it: the row must name an outcome event of its Run, at its position, with
-- every cell as the event holds it. On PostgreSQL the runtime has no INSERT on the table at all
-- (pg-0031: its trigger writes it as the owner).
CREATE TRIGGER start_outcomes_project_their_event BEFORE INSERT ON start_outcomes
  WHEN NOT EXISTS (
    SELECT 1 FROM events e
     WHERE e.event_id = NEW.event_id
       AND e.stream_id = 'run-' || NEW.run_id
       AND e.stream_position = NEW.stream_position
       AND e.committed_at_ms = NEW.committed_at_ms
       AND NEW.outcome IS (CASE e.event_type WHEN 'StepRunCompleted' THEN 'completed' WHEN 'StepRunFailed' THEN 'failed' WHEN 'StepRunLost' THEN 'lost' END)
       AND json_extract(e.data_json, '$.startId') IS NEW.start_id
       AND json_extract(e.data_json, '$.runId') IS NEW.run_id
       AND json_extract(e.data_json, '$.stepRunId') IS NEW.step_run_id
       AND json_extract(e.data_json, '$.stepRunVersion') IS NEW.step_run_version
       AND json_extract(e.data_json, '$.resolution.decidedBy') IS NEW.decided_by
       AND json_extract(e.data_json, '$.resolution.reason') IS NEW.reason
       AND json_extract(e.data_json, '$.outcomeDigest') IS NEW.outcome_digest
       AND json_extract(e.data_json, '$.occurredAtMs') IS NEW.requested_at_ms)
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a start outcome row is the projection of its outcome event (R9.1)');
END;
