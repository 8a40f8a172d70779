-- A compact replay index. Each of the seven rows a start adds to start_replay_identities
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
-- The table stays immutable (its update and delete triggers are kept).
--
-- Data moved forward: the column is dropped only after proving that every row's command
-- digest equals the one its barrier holds, so the joined index equals the old one row for
-- row; a store where one differs (or a row without its barrier) is refused here rather than
-- lose the evidence of the difference. The PostgreSQL twin is pg-0051-compact-replay-index.

CREATE TEMP TABLE compact_index_check (
  what TEXT NOT NULL,
  ok   INTEGER NOT NULL CONSTRAINT a_replay_identity_differs_from_its_barrier CHECK (ok = 1)
);
INSERT INTO compact_index_check SELECT i.identity || ' ' || i.value, coalesce(i.command_digest = b.command_digest, 0)
  FROM start_replay_identities i LEFT JOIN tool_execution_start_barriers b ON b.start_id = i.start_id;
DROP TABLE compact_index_check;

DROP INDEX start_replay_identities_start;
ALTER TABLE start_replay_identities DROP COLUMN command_digest;
