-- Recovery read model (issue 5): the outcome fact of each start, one row per barrier that has
-- one. A barrier without a row here is in doubt: its adapter may or may not have acted.
-- Written inline, in the transaction that appends the StepRunCompleted / StepRunFailed /
-- StepRunLost event; rebuilt from the event log by the specs and checked by `verify`.
CREATE TABLE start_outcomes (
  start_id         TEXT    NOT NULL PRIMARY KEY REFERENCES tool_execution_start_barriers (start_id),
  run_id           TEXT    NOT NULL,
  step_run_id      TEXT    NOT NULL,
  outcome          TEXT    NOT NULL CHECK (outcome IN ('completed', 'failed', 'lost')),
  decided_by       TEXT    NOT NULL,
  reason           TEXT    NOT NULL,
  outcome_digest   TEXT,
  step_run_version INTEGER NOT NULL CHECK (step_run_version >= 1),
  event_id         TEXT    NOT NULL UNIQUE REFERENCES events (event_id),
  stream_position  INTEGER NOT NULL CHECK (stream_position >= 1),
  requested_at_ms  INTEGER NOT NULL,
  committed_at_ms  INTEGER NOT NULL,
  UNIQUE (run_id, step_run_id, step_run_version),
  FOREIGN KEY (run_id, step_run_id) REFERENCES step_runs (run_id, step_run_id)
) STRICT;

-- Outcomes are facts: a later decision is a new event, never an edit of this row.
CREATE TRIGGER start_outcomes_no_update BEFORE UPDATE ON start_outcomes BEGIN SELECT RAISE(ABORT, 'start outcomes are facts: append a new event instead'); END;
CREATE TRIGGER start_outcomes_no_delete BEFORE DELETE ON start_outcomes BEGIN SELECT RAISE(ABORT, 'start outcomes are facts: append a new event instead'); END;

-- Outcome events appended before this migration existed are projected from the log, so an
-- upgraded database lists exactly the starts that are really in doubt.
INSERT INTO start_outcomes (start_id, run_id, step_run_id, outcome, decided_by, reason, outcome_digest, step_run_version,
    event_id, stream_position, requested_at_ms, committed_at_ms)
SELECT json_extract(data_json, '$.startId'),
       json_extract(data_json, '$.runId'),
       json_extract(data_json, '$.stepRunId'),
       CASE event_type WHEN 'StepRunCompleted' THEN 'completed' WHEN 'StepRunFailed' THEN 'failed' ELSE 'lost' END,
       json_extract(data_json, '$.resolution.decidedBy'),
       json_extract(data_json, '$.resolution.reason'),
       json_extract(data_json, '$.outcomeDigest'),
       json_extract(data_json, '$.stepRunVersion'),
       event_id,
       stream_position,
       json_extract(data_json, '$.occurredAtMs'),
       committed_at_ms
  FROM events
 WHERE event_type IN ('StepRunCompleted', 'StepRunFailed', 'StepRunLost')
 ORDER BY global_position;

-- `verify` proves that no evidence exists without its StepRun move: evidence -> mutation by start.
CREATE INDEX step_run_mutations_start ON step_run_mutations (start_id);
