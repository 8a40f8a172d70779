-- The recovery read model kept by the database itself, as on PostgreSQL: every inserted
-- StepRunCompleted / StepRunFailed / StepRunLost event writes its start_outcomes row in the
-- same statement, whoever appends it (barriers, runs.handle, the emmett EventStore). The
-- TypeScript derivation (projections/outcomeRows.ts) stays as the oracle that every read and
-- the rebuild specs compare the stored row with.
CREATE TRIGGER events_project_start_outcome AFTER INSERT ON events
  WHEN NEW.event_type IN ('StepRunCompleted', 'StepRunFailed', 'StepRunLost')
BEGIN
  INSERT INTO start_outcomes (start_id, run_id, step_run_id, outcome, decided_by, reason, outcome_digest, step_run_version,
      event_id, stream_position, requested_at_ms, committed_at_ms)
  VALUES (json_extract(NEW.data_json, '$.startId'),
          json_extract(NEW.data_json, '$.runId'),
          json_extract(NEW.data_json, '$.stepRunId'),
          CASE NEW.event_type WHEN 'StepRunCompleted' THEN 'completed' WHEN 'StepRunFailed' THEN 'failed' ELSE 'lost' END,
          json_extract(NEW.data_json, '$.resolution.decidedBy'),
          json_extract(NEW.data_json, '$.resolution.reason'),
          json_extract(NEW.data_json, '$.outcomeDigest'),
          json_extract(NEW.data_json, '$.stepRunVersion'),
          NEW.event_id,
          NEW.stream_position,
          json_extract(NEW.data_json, '$.occurredAtMs'),
          NEW.committed_at_ms);
END;
