-- Recovery lists the oldest starts with no outcome. Found as "barriers with no outcome row", a
-- page of N cost a walk past every start resolved before it, and a sort of them all: seconds
-- with 10^4 starts in doubt. This projection holds exactly the starts with no outcome, written by
-- the database itself in the statement that inserts the barrier and removed in the one that
-- inserts the outcome (so in their transaction, whichever code path wrote them), and indexed in
-- listing order (commit time, then start id), whole and per Project and per Run: a page of N is
-- N index entries. Reads re-check each listed start against its barrier and outcome (R9.3), and
-- `verify` re-derives the table from the log. The guards below keep it the image of those rows.
-- Data moved forward: every stored barrier with no outcome row. The PostgreSQL twin is pg-0064.
CREATE TABLE in_doubt_starts (
  start_id        TEXT    NOT NULL PRIMARY KEY REFERENCES tool_execution_start_barriers (start_id),
  project_id      TEXT    NOT NULL,
  run_id          TEXT    NOT NULL,
  committed_at_ms INTEGER NOT NULL
) STRICT;

CREATE INDEX in_doubt_starts_listing ON in_doubt_starts (committed_at_ms, start_id);
CREATE INDEX in_doubt_starts_project ON in_doubt_starts (project_id, committed_at_ms, start_id);
CREATE INDEX in_doubt_starts_run ON in_doubt_starts (run_id, committed_at_ms, start_id);
-- A page that lists its whole scope checks that no running StepRun lies beyond it: it reads the
-- running StepRuns alone, not every StepRun the store has.
CREATE INDEX step_runs_running ON step_runs (run_id, step_run_id) WHERE status = 'running';

INSERT INTO in_doubt_starts (start_id, project_id, run_id, committed_at_ms)
  SELECT b.start_id, b.project_id, b.run_id, b.committed_at_ms FROM tool_execution_start_barriers b
   WHERE NOT EXISTS (SELECT 1 FROM start_outcomes o WHERE o.start_id = b.start_id);

CREATE TRIGGER in_doubt_starts_from_barrier AFTER INSERT ON tool_execution_start_barriers
BEGIN
  INSERT INTO in_doubt_starts (start_id, project_id, run_id, committed_at_ms)
    VALUES (NEW.start_id, NEW.project_id, NEW.run_id, NEW.committed_at_ms);
END;

CREATE TRIGGER in_doubt_starts_leave_on_outcome AFTER INSERT ON start_outcomes
BEGIN
  DELETE FROM in_doubt_starts WHERE start_id = NEW.start_id;
END;

CREATE TRIGGER in_doubt_starts_insert_mirrors_barrier BEFORE INSERT ON in_doubt_starts
  WHEN NOT EXISTS (SELECT 1 FROM tool_execution_start_barriers b
                    WHERE b.start_id = NEW.start_id AND b.project_id = NEW.project_id
                      AND b.run_id = NEW.run_id AND b.committed_at_ms = NEW.committed_at_ms)
    OR EXISTS (SELECT 1 FROM start_outcomes o WHERE o.start_id = NEW.start_id)
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: the in-doubt index holds a start with no outcome, as its barrier holds it (R9.1)');
END;

CREATE TRIGGER in_doubt_starts_no_update BEFORE UPDATE ON in_doubt_starts
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: an in-doubt index row is never changed (R9.1)');
END;

CREATE TRIGGER in_doubt_starts_delete_on_outcome BEFORE DELETE ON in_doubt_starts
  WHEN NOT EXISTS (SELECT 1 FROM start_outcomes o WHERE o.start_id = OLD.start_id)
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a start leaves the in-doubt index only with its outcome (R9.1)');
END;
