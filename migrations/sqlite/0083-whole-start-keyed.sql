-- The start_whole_at_commit rows (0063) keyed by their start id alone. The table was a rowid
-- table with a TEXT primary key: each start id was stored twice (in the row and in its
-- autoindex) and every start wrote two B-trees for it. As a WITHOUT ROWID table the row is its
-- key: the same one row per start, the same deferred foreign key to the barrier (COMMIT fails
-- unless the start's barrier exists by then, R9.1), one B-tree. Nothing reads its rowid.
--
-- Data moved forward: every row is copied. A row whose barrier is missing is refused here (the
-- check below fails the migration) rather than carried into a table whose deferred foreign key
-- would refuse it at COMMIT without naming it.

CREATE TEMP TABLE whole_start_keyed_check (
  what TEXT NOT NULL,
  ok   INTEGER NOT NULL CONSTRAINT a_whole_start_row_without_its_barrier CHECK (ok = 1)
);
INSERT INTO whole_start_keyed_check SELECT w.start_id, b.start_id IS NOT NULL
  FROM start_whole_at_commit w LEFT JOIN tool_execution_start_barriers b ON b.start_id = w.start_id;
DROP TABLE whole_start_keyed_check;

CREATE TEMP TABLE start_whole_at_commit_0083 AS SELECT start_id FROM start_whole_at_commit;
DROP TABLE start_whole_at_commit;
CREATE TABLE start_whole_at_commit (
  start_id TEXT NOT NULL PRIMARY KEY REFERENCES tool_execution_start_barriers (start_id) DEFERRABLE INITIALLY DEFERRED
) STRICT, WITHOUT ROWID;
INSERT INTO start_whole_at_commit (start_id) SELECT start_id FROM temp.start_whole_at_commit_0083 ORDER BY start_id;
DROP TABLE temp.start_whole_at_commit_0083;
