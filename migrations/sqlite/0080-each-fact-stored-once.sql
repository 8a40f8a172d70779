-- Each fact stored once. The canonical JSON of every start record lives in one place: the data
-- of its event (events.data_json), which is chained (R9.2) and which every verified read already
-- decodes. The per-kind tables keep their mirror columns and their keys, the references by
-- which a read finds the event (audit:<auditEventId>, trace:<traceId>, receipt:<auditReceiptId>,
-- the RunEvent id, barrier:<startId>), and lose their copies of the JSON (event_json,
-- anchor_json, receipt_json, mutation_json, barrier_json). R5.3 is unchanged: a read checks the
-- event's JSON against every mirror column and recomputes every digest.
--
-- Each R4.1 identity is enforced once, by the replay index (start_replay_identities_key). The
-- nine unique constraints that repeated it go: audit_receipts (audit_event_id), (trace_id);
-- step_run_mutations (run_event_id); the barrier's mutation_id, run_event_id, trace_id,
-- audit_event_id, audit_receipt_id and (run_id, step_run_id, started_step_run_version).
-- Kept, and why:
--   * the primary keys of the four fact tables and of the barrier: they are the targets of the
--     foreign keys R5.1 requires (barrier -> mutation, Trace, Audit event, Audit receipt;
--     receipt -> Audit event, Trace; replay index, outcomes, driver claims, MACs -> barrier),
--     and the access path of the verified read. A foreign key needs a unique parent key, so
--     these are not a second copy of an identity check but the tables' own keys.
--   * a plain (non-unique) index on the barrier's attempt columns: R5.4's lookup by attempt
--     reads both the replay index and the barrier side, so a missing or stray row fails closed
--     (R9.3) at constant cost; uniqueness of the attempt is the replay index's alone.
--
-- Data moved forward: the rows are copied without their JSON, after proving that each copy
-- equals its event's data byte for byte. A store where they differ is refused here (the check
-- below fails the migration) rather than lose the evidence of the difference.
--
-- SQLite drops a UNIQUE column constraint only by rebuilding its table. Each table is copied
-- aside, dropped and created again under its own name, so the foreign keys of other tables
-- keep naming it; with defer_foreign_keys the drop's dangling references are counted and the
-- copy back resolves every one of them before COMMIT. Every trigger and index on a rebuilt table is
-- recreated below (0003, 0055, 0057, 0063); specs/sqlite/storedOnce.int.spec.ts compares
-- sqlite_master before and after. The PostgreSQL twin is pg-0050-each-fact-stored-once.

CREATE TEMP TABLE stored_once_check (
  what TEXT NOT NULL,
  ok   INTEGER NOT NULL CONSTRAINT a_stored_json_differs_from_its_event CHECK (ok = 1)
);
INSERT INTO stored_once_check SELECT 'audit ' || o.audit_event_id, coalesce(o.event_json = e.data_json, 0)
  FROM security_audit_events o LEFT JOIN events e ON e.event_id = 'audit:' || o.audit_event_id;
INSERT INTO stored_once_check SELECT 'trace ' || o.trace_id, coalesce(o.anchor_json = e.data_json, 0)
  FROM trace_anchors o LEFT JOIN events e ON e.event_id = 'trace:' || o.trace_id;
INSERT INTO stored_once_check SELECT 'receipt ' || o.audit_receipt_id, coalesce(o.receipt_json = e.data_json, 0)
  FROM audit_receipts o LEFT JOIN events e ON e.event_id = 'receipt:' || o.audit_receipt_id;
INSERT INTO stored_once_check SELECT 'mutation ' || o.mutation_id, coalesce(o.mutation_json = e.data_json, 0)
  FROM step_run_mutations o LEFT JOIN events e ON e.event_id = o.run_event_id;
INSERT INTO stored_once_check SELECT 'barrier ' || o.start_id,
       coalesce('{"barrier":' || o.barrier_json || ',"barrierDigest":' || json_quote(o.barrier_digest) || '}' = e.data_json, 0)
  FROM tool_execution_start_barriers o LEFT JOIN events e ON e.event_id = 'barrier:' || o.start_id;
DROP TABLE stored_once_check;

PRAGMA defer_foreign_keys = ON;

-- ------------------------------------------------------------------ security_audit_events
CREATE TEMP TABLE security_audit_events_0080 AS SELECT * FROM security_audit_events ORDER BY rowid;
DROP TABLE security_audit_events;
CREATE TABLE security_audit_events (
  audit_event_id     TEXT    NOT NULL PRIMARY KEY,
  start_id           TEXT    NOT NULL,
  run_id             TEXT    NOT NULL,
  step_run_id        TEXT    NOT NULL,
  audit_event_digest TEXT    NOT NULL,
  committed_at_ms    INTEGER NOT NULL
) STRICT;
INSERT INTO security_audit_events SELECT audit_event_id, start_id, run_id, step_run_id, audit_event_digest, committed_at_ms
  FROM temp.security_audit_events_0080 ORDER BY rowid;
DROP TABLE temp.security_audit_events_0080;

-- ------------------------------------------------------------------ trace_anchors
CREATE TEMP TABLE trace_anchors_0080 AS SELECT * FROM trace_anchors ORDER BY rowid;
DROP TABLE trace_anchors;
CREATE TABLE trace_anchors (
  trace_id        TEXT    NOT NULL PRIMARY KEY,
  span_id         TEXT    NOT NULL,
  start_id        TEXT    NOT NULL,
  run_id          TEXT    NOT NULL,
  step_run_id     TEXT    NOT NULL,
  trace_digest    TEXT    NOT NULL,
  committed_at_ms INTEGER NOT NULL
) STRICT;
INSERT INTO trace_anchors SELECT trace_id, span_id, start_id, run_id, step_run_id, trace_digest, committed_at_ms
  FROM temp.trace_anchors_0080 ORDER BY rowid;
DROP TABLE temp.trace_anchors_0080;

-- ------------------------------------------------------------------ audit_receipts
CREATE TEMP TABLE audit_receipts_0080 AS SELECT * FROM audit_receipts ORDER BY rowid;
DROP TABLE audit_receipts;
CREATE TABLE audit_receipts (
  audit_receipt_id TEXT    NOT NULL PRIMARY KEY,
  audit_event_id   TEXT    NOT NULL REFERENCES security_audit_events (audit_event_id),
  trace_id         TEXT    NOT NULL REFERENCES trace_anchors (trace_id),
  start_id         TEXT    NOT NULL,
  receipt_digest   TEXT    NOT NULL,
  committed_at_ms  INTEGER NOT NULL
) STRICT;
INSERT INTO audit_receipts SELECT audit_receipt_id, audit_event_id, trace_id, start_id, receipt_digest, committed_at_ms
  FROM temp.audit_receipts_0080 ORDER BY rowid;
DROP TABLE temp.audit_receipts_0080;

-- ------------------------------------------------------------------ step_run_mutations
CREATE TEMP TABLE step_run_mutations_0080 AS SELECT * FROM step_run_mutations ORDER BY rowid;
DROP TABLE step_run_mutations;
CREATE TABLE step_run_mutations (
  mutation_id             TEXT    NOT NULL PRIMARY KEY,
  run_event_id            TEXT    NOT NULL REFERENCES events (event_id),
  start_id                TEXT    NOT NULL,
  run_id                  TEXT    NOT NULL,
  step_run_id             TEXT    NOT NULL,
  from_status             TEXT    NOT NULL,
  to_status               TEXT    NOT NULL CHECK (to_status = 'running'),
  from_version            INTEGER NOT NULL,
  to_version              INTEGER NOT NULL CHECK (to_version = from_version + 1),
  run_event_sequence      INTEGER NOT NULL,
  mutation_digest         TEXT    NOT NULL,
  started_step_run_digest TEXT    NOT NULL,
  requested_at_ms         INTEGER NOT NULL,
  committed_at_ms         INTEGER NOT NULL,
  FOREIGN KEY (run_id, step_run_id) REFERENCES step_runs (run_id, step_run_id)
) STRICT;
INSERT INTO step_run_mutations SELECT mutation_id, run_event_id, start_id, run_id, step_run_id, from_status, to_status, from_version, to_version,
    run_event_sequence, mutation_digest, started_step_run_digest, requested_at_ms, committed_at_ms
  FROM temp.step_run_mutations_0080 ORDER BY rowid;
DROP TABLE temp.step_run_mutations_0080;

-- ------------------------------------------------------------------ tool_execution_start_barriers
CREATE TEMP TABLE tool_execution_start_barriers_0080 AS SELECT * FROM tool_execution_start_barriers ORDER BY rowid;
DROP TABLE tool_execution_start_barriers;
CREATE TABLE tool_execution_start_barriers (
  start_id                 TEXT    NOT NULL PRIMARY KEY,
  command_digest           TEXT    NOT NULL,
  barrier_digest           TEXT    NOT NULL,
  project_id               TEXT    NOT NULL,
  run_id                   TEXT    NOT NULL,
  step_run_id              TEXT    NOT NULL,
  started_step_run_version INTEGER NOT NULL,
  started_step_run_digest  TEXT    NOT NULL,
  mutation_id              TEXT    NOT NULL REFERENCES step_run_mutations (mutation_id),
  mutation_digest          TEXT    NOT NULL,
  run_event_id             TEXT    NOT NULL REFERENCES events (event_id),
  trace_id                 TEXT    NOT NULL REFERENCES trace_anchors (trace_id),
  trace_digest             TEXT    NOT NULL,
  audit_event_id           TEXT    NOT NULL REFERENCES security_audit_events (audit_event_id),
  audit_receipt_id         TEXT    NOT NULL REFERENCES audit_receipts (audit_receipt_id),
  audit_receipt_digest     TEXT    NOT NULL,
  adapter_id               TEXT    NOT NULL,
  committed_at_ms          INTEGER NOT NULL,
  FOREIGN KEY (run_id, step_run_id) REFERENCES step_runs (run_id, step_run_id)
) STRICT;
INSERT INTO tool_execution_start_barriers SELECT start_id, command_digest, barrier_digest, project_id, run_id, step_run_id, started_step_run_version,
    started_step_run_digest, mutation_id, mutation_digest, run_event_id, trace_id, trace_digest, audit_event_id, audit_receipt_id,
    audit_receipt_digest, adapter_id, committed_at_ms
  FROM temp.tool_execution_start_barriers_0080 ORDER BY rowid;
DROP TABLE temp.tool_execution_start_barriers_0080;

PRAGMA defer_foreign_keys = OFF;

-- ------------------------------------------------------------------ indexes and triggers, again
CREATE INDEX tool_execution_start_barriers_attempt ON tool_execution_start_barriers (run_id, step_run_id, started_step_run_version);
CREATE INDEX step_run_mutations_start ON step_run_mutations (start_id);

CREATE TRIGGER security_audit_events_no_update BEFORE UPDATE ON security_audit_events BEGIN SELECT RAISE(ABORT, 'security audit events are append-only'); END;
CREATE TRIGGER security_audit_events_no_delete BEFORE DELETE ON security_audit_events BEGIN SELECT RAISE(ABORT, 'security audit events are append-only'); END;
CREATE TRIGGER trace_anchors_no_update BEFORE UPDATE ON trace_anchors BEGIN SELECT RAISE(ABORT, 'trace anchors are append-only'); END;
CREATE TRIGGER trace_anchors_no_delete BEFORE DELETE ON trace_anchors BEGIN SELECT RAISE(ABORT, 'trace anchors are append-only'); END;
CREATE TRIGGER audit_receipts_no_update BEFORE UPDATE ON audit_receipts BEGIN SELECT RAISE(ABORT, 'audit receipts are append-only'); END;
CREATE TRIGGER audit_receipts_no_delete BEFORE DELETE ON audit_receipts BEGIN SELECT RAISE(ABORT, 'audit receipts are append-only'); END;
CREATE TRIGGER step_run_mutations_no_update BEFORE UPDATE ON step_run_mutations BEGIN SELECT RAISE(ABORT, 'the mutation ledger is append-only'); END;
CREATE TRIGGER step_run_mutations_no_delete BEFORE DELETE ON step_run_mutations BEGIN SELECT RAISE(ABORT, 'the mutation ledger is append-only'); END;
CREATE TRIGGER tool_execution_start_barriers_no_update BEFORE UPDATE ON tool_execution_start_barriers BEGIN SELECT RAISE(ABORT, 'start barriers are immutable'); END;
CREATE TRIGGER tool_execution_start_barriers_no_delete BEFORE DELETE ON tool_execution_start_barriers BEGIN SELECT RAISE(ABORT, 'start barriers are immutable'); END;

CREATE TRIGGER security_audit_events_start_whole AFTER INSERT ON security_audit_events
BEGIN INSERT OR IGNORE INTO start_whole_at_commit (start_id) VALUES (NEW.start_id); END;
CREATE TRIGGER trace_anchors_start_whole AFTER INSERT ON trace_anchors
BEGIN INSERT OR IGNORE INTO start_whole_at_commit (start_id) VALUES (NEW.start_id); END;
CREATE TRIGGER audit_receipts_start_whole AFTER INSERT ON audit_receipts
BEGIN INSERT OR IGNORE INTO start_whole_at_commit (start_id) VALUES (NEW.start_id); END;
CREATE TRIGGER step_run_mutations_start_whole AFTER INSERT ON step_run_mutations
BEGIN INSERT OR IGNORE INTO start_whole_at_commit (start_id) VALUES (NEW.start_id); END;

-- the barrier row comes with its own event (inserted just before it)
CREATE TRIGGER tool_execution_start_barriers_with_event BEFORE INSERT ON tool_execution_start_barriers
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a barrier row without its barrier event (R9.1)')
   WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.event_id = 'barrier:' || NEW.start_id
                       AND json_extract(e.data_json, '$.barrierDigest') = NEW.barrier_digest);
END;
