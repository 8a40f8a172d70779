-- Recovery lists the oldest starts with no outcome. Found as "barriers with no outcome row", a
-- page of N cost a walk past every start resolved before it, and a sort of them all: tens of
-- seconds with 10^4 starts in doubt. This projection holds exactly the starts with no outcome,
-- written as the owner by the statement that inserts the barrier and removed by the one that
-- inserts the outcome row (so in their transaction, whichever code path wrote them), and indexed
-- in listing order (commit time, then start id), whole and per Project and per Run: a page of N
-- is N index entries. No product role may write it (SELECT only); reads re-check each listed
-- start against its barrier and outcome (R9.3), and `verify` re-derives the table from the log.
-- Data moved forward: every stored barrier with no outcome row. The SQLite twin is 0092.
SET LOCAL ROLE ql3_owner;

CREATE TABLE ql3.in_doubt_starts (
  start_id        TEXT   NOT NULL PRIMARY KEY REFERENCES ql3.tool_execution_start_barriers (start_id),
  project_id      TEXT   NOT NULL,
  run_id          TEXT   NOT NULL,
  committed_at_ms BIGINT NOT NULL
);

CREATE INDEX in_doubt_starts_listing ON ql3.in_doubt_starts (committed_at_ms, start_id);
CREATE INDEX in_doubt_starts_project ON ql3.in_doubt_starts (project_id, committed_at_ms, start_id);
CREATE INDEX in_doubt_starts_run ON ql3.in_doubt_starts (run_id, committed_at_ms, start_id);
-- A page that lists its whole scope checks that no running StepRun lies beyond it: it reads the
-- running StepRuns alone, not every StepRun the store has.
CREATE INDEX step_runs_running ON ql3.step_runs (run_id, step_run_id) WHERE status = 'running';

INSERT INTO ql3.in_doubt_starts (start_id, project_id, run_id, committed_at_ms)
  SELECT b.start_id, b.project_id, b.run_id, b.committed_at_ms FROM ql3.tool_execution_start_barriers b
   WHERE NOT EXISTS (SELECT 1 FROM ql3.start_outcomes o WHERE o.start_id = b.start_id);

CREATE FUNCTION ql3.in_doubt_from_barrier() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  INSERT INTO ql3.in_doubt_starts (start_id, project_id, run_id, committed_at_ms)
    VALUES (NEW.start_id, NEW.project_id, NEW.run_id, NEW.committed_at_ms);
  RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION ql3.in_doubt_from_barrier() FROM PUBLIC;

CREATE FUNCTION ql3.in_doubt_leave_on_outcome() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  DELETE FROM ql3.in_doubt_starts WHERE start_id = NEW.start_id;
  RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION ql3.in_doubt_leave_on_outcome() FROM PUBLIC;

CREATE TRIGGER in_doubt_starts_from_barrier AFTER INSERT ON ql3.tool_execution_start_barriers
  FOR EACH ROW EXECUTE FUNCTION ql3.in_doubt_from_barrier();
CREATE TRIGGER in_doubt_starts_leave_on_outcome AFTER INSERT ON ql3.start_outcomes
  FOR EACH ROW EXECUTE FUNCTION ql3.in_doubt_leave_on_outcome();
CREATE TRIGGER in_doubt_starts_no_update BEFORE UPDATE ON ql3.in_doubt_starts
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('an in-doubt index row is never changed');
CREATE TRIGGER in_doubt_starts_no_truncate BEFORE TRUNCATE ON ql3.in_doubt_starts
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('the in-doubt index is the image of the barriers and outcomes');

GRANT SELECT ON ql3.in_doubt_starts TO ql3_runtime, ql3_admin, ql3_reader;
