-- The replay index keyed by its own identity. start_replay_identities was a rowid table with a
-- unique index on (identity, value): every row's identity and value were stored twice, in the
-- table and in start_replay_identities_key, and each insert wrote two B-trees. As a WITHOUT ROWID
-- table whose primary key is (identity, value) the rows are the index: each value is stored once
-- and each R4.1 identity is still enforced by exactly one unique index, the table's primary key
-- (a second row under one identity value is refused as before, SQLITE_CONSTRAINT_PRIMARYKEY on
-- start_replay_identities.identity, start_replay_identities.value). Kept: the columns, the check
-- on identity names, the foreign key to the barrier, the update and delete triggers. No reader
-- uses the rowid (the barrier read's probes return the index rows themselves).
--
-- Data moved forward: every row is copied, in key order. A store holding two rows under one
-- identity value (its unique index dropped) or a row whose barrier is missing is refused here
-- (the checks below fail the migration) rather than lose the evidence of the difference: the
-- copy would keep one row of two, or a row the keyed table's foreign key refuses. The PostgreSQL
-- schema is unchanged (its B-tree index is separate from the heap whatever the table).

CREATE TEMP TABLE replay_index_keyed_check (
  what TEXT NOT NULL,
  ok   INTEGER NOT NULL CONSTRAINT a_replay_identity_is_not_one_row_with_its_barrier CHECK (ok = 1)
);
INSERT INTO replay_index_keyed_check SELECT identity || ' ' || value, count(*) = 1
  FROM start_replay_identities GROUP BY identity, value;
INSERT INTO replay_index_keyed_check SELECT i.identity || ' ' || i.value, b.start_id IS NOT NULL
  FROM start_replay_identities i LEFT JOIN tool_execution_start_barriers b ON b.start_id = i.start_id;
DROP TABLE replay_index_keyed_check;

CREATE TEMP TABLE start_replay_identities_0082 AS SELECT identity, value, start_id FROM start_replay_identities;
DROP TABLE start_replay_identities;
CREATE TABLE start_replay_identities (
  identity TEXT NOT NULL CHECK (identity IN ('startId', 'mutationId', 'runEventId', 'traceId', 'auditEventId', 'auditReceiptId', 'attempt')),
  value    TEXT NOT NULL,
  start_id TEXT NOT NULL REFERENCES tool_execution_start_barriers (start_id),
  PRIMARY KEY (identity, value)
) STRICT, WITHOUT ROWID;
INSERT INTO start_replay_identities (identity, value, start_id)
  SELECT identity, value, start_id FROM temp.start_replay_identities_0082 ORDER BY identity, value;
DROP TABLE temp.start_replay_identities_0082;

CREATE TRIGGER start_replay_identities_no_update BEFORE UPDATE ON start_replay_identities BEGIN SELECT RAISE(ABORT, 'replay identities are immutable'); END;
CREATE TRIGGER start_replay_identities_no_delete BEFORE DELETE ON start_replay_identities BEGIN SELECT RAISE(ABORT, 'replay identities are immutable'); END;
