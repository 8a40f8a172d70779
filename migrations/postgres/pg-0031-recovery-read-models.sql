-- Recovery read model (issue 5): the outcome fact of each start, one row per barrier that has
-- one. A barrier without a row here is in doubt: its adapter may or may not have acted.
-- The SQLite twin is 0057-recovery-read-models.
--
-- The row is projected by a trigger on the event log, so it is written by the very statement
-- that appends the StepRunCompleted / StepRunFailed / StepRunLost event, in its transaction,
-- whichever code path appended it. Reads re-derive the row from its event (R5.3) and `verify`
-- and the rebuild specs compare the whole table with the log.
SET LOCAL ROLE ql3_owner;

CREATE TABLE ql3.start_outcomes (
  start_id         TEXT   NOT NULL PRIMARY KEY REFERENCES ql3.tool_execution_start_barriers (start_id),
  run_id           TEXT   NOT NULL,
  step_run_id      TEXT   NOT NULL,
  outcome          TEXT   NOT NULL CHECK (outcome IN ('completed', 'failed', 'lost')),
  decided_by       TEXT   NOT NULL,
  reason           TEXT   NOT NULL,
  outcome_digest   TEXT,
  step_run_version BIGINT NOT NULL CHECK (step_run_version >= 1),
  event_id         TEXT   NOT NULL REFERENCES ql3.events (event_id),
  stream_position  BIGINT NOT NULL CHECK (stream_position >= 1),
  requested_at_ms  BIGINT NOT NULL,
  committed_at_ms  BIGINT NOT NULL,
  CONSTRAINT start_outcomes_event_id_key UNIQUE (event_id),
  CONSTRAINT start_outcomes_attempt_key UNIQUE (run_id, step_run_id, step_run_version),
  FOREIGN KEY (run_id, step_run_id) REFERENCES ql3.step_runs (run_id, step_run_id)
);

-- Outcomes are facts: a later decision is a new event, never an edit of this row.
CREATE TRIGGER start_outcomes_append_only BEFORE UPDATE OR DELETE ON ql3.start_outcomes
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('start outcomes are facts: append a new event instead');
CREATE TRIGGER start_outcomes_no_truncate BEFORE TRUNCATE ON ql3.start_outcomes
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('start outcomes are facts: append a new event instead');

-- The inline projection. SECURITY DEFINER (owned by ql3_owner) so that no product role needs,
-- or gets, INSERT on the read model: an outcome row exists only as the image of its event.
CREATE FUNCTION ql3.project_start_outcome() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  d jsonb := NEW.data_json::jsonb;
BEGIN
  INSERT INTO ql3.start_outcomes (start_id, run_id, step_run_id, outcome, decided_by, reason, outcome_digest, step_run_version,
      event_id, stream_position, requested_at_ms, committed_at_ms)
  VALUES (d ->> 'startId', d ->> 'runId', d ->> 'stepRunId',
      CASE NEW.event_type WHEN 'StepRunCompleted' THEN 'completed' WHEN 'StepRunFailed' THEN 'failed' ELSE 'lost' END,
      d -> 'resolution' ->> 'decidedBy', d -> 'resolution' ->> 'reason', d ->> 'outcomeDigest', (d ->> 'stepRunVersion')::bigint,
      NEW.event_id, NEW.stream_position, (d ->> 'occurredAtMs')::bigint, NEW.committed_at_ms);
  RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION ql3.project_start_outcome() FROM PUBLIC;

CREATE TRIGGER events_project_start_outcome AFTER INSERT ON ql3.events
  FOR EACH ROW WHEN (NEW.event_type IN ('StepRunCompleted', 'StepRunFailed', 'StepRunLost'))
  EXECUTE FUNCTION ql3.project_start_outcome();

-- Outcome events appended before this migration existed are projected from the log, so an
-- upgraded database lists exactly the starts that are really in doubt.
INSERT INTO ql3.start_outcomes (start_id, run_id, step_run_id, outcome, decided_by, reason, outcome_digest, step_run_version,
    event_id, stream_position, requested_at_ms, committed_at_ms)
SELECT d ->> 'startId', d ->> 'runId', d ->> 'stepRunId',
       CASE e.event_type WHEN 'StepRunCompleted' THEN 'completed' WHEN 'StepRunFailed' THEN 'failed' ELSE 'lost' END,
       d -> 'resolution' ->> 'decidedBy', d -> 'resolution' ->> 'reason', d ->> 'outcomeDigest', (d ->> 'stepRunVersion')::bigint,
       e.event_id, e.stream_position, (d ->> 'occurredAtMs')::bigint, e.committed_at_ms
  FROM ql3.events e CROSS JOIN LATERAL (SELECT e.data_json::jsonb AS d) j
 WHERE e.event_type IN ('StepRunCompleted', 'StepRunFailed', 'StepRunLost')
 ORDER BY e.global_position;

-- `verify` proves that no evidence exists without its StepRun move: evidence -> mutation by start.
CREATE INDEX step_run_mutations_start ON ql3.step_run_mutations (start_id);

-- A read model: the runtime and operators read it; nobody writes it but the projection.
REVOKE ALL ON ql3.start_outcomes FROM PUBLIC;
GRANT SELECT ON ql3.start_outcomes TO ql3_runtime, ql3_admin, ql3_reader;
