-- A compact replay index. Each of the seven rows a start adds to ql3.start_replay_identities
-- repeated the start's command digest (71 characters), which its barrier row already holds,
-- and a second index on start_id served only the barrier read's search for rows naming the
-- start. Both go:
--   * command_digest: every reader takes it from the barrier the row names (a join on the
--     barrier's primary key); the start_id column is the row's one reference to its start and
--     a foreign key to the barrier, so the join always finds exactly one row.
--   * start_replay_identities_start: the barrier read probes each of its seven identity values
--     through the unique index (start_replay_identities_key), which finds a missing, changed or
--     duplicated row; a row that names the start under a value the barrier does not hold is
--     found by `verify` (every index row against its barrier, and every barrier against its
--     seven rows) and by any lookup of that value (its barrier does not hold it: fail closed).
-- Each R4.1 identity is still enforced by exactly one unique index, start_replay_identities_key.
-- Grants (ql3_runtime: SELECT, INSERT) and the immutability triggers are unchanged.
--
-- Data moved forward: the column is dropped only after proving that every row's command
-- digest equals the one its barrier holds, so the joined index equals the old one row for
-- row; a store where one differs (or a row without its barrier) is refused rather than lose the
-- evidence of the difference. DROP COLUMN leaves the old rows' bytes in place until the table
-- is next rewritten (VACUUM FULL); every row written from now on is without them.
-- The SQLite twin is 0081-compact-replay-index.
SET LOCAL ROLE ql3_owner;

DO $check$
DECLARE
  differs text;
BEGIN
  SELECT i.identity || ' ' || i.value INTO differs
    FROM ql3.start_replay_identities i LEFT JOIN ql3.tool_execution_start_barriers b ON b.start_id = i.start_id
   WHERE b.command_digest IS DISTINCT FROM i.command_digest
   LIMIT 1;
  IF differs IS NOT NULL THEN
    RAISE EXCEPTION 'a_replay_identity_differs_from_its_barrier: %', differs;
  END IF;
END
$check$;

DROP INDEX ql3.start_replay_identities_start;
ALTER TABLE ql3.start_replay_identities DROP COLUMN command_digest;
