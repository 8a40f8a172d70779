-- The start barrier store beyond the ADR's tables, in its final form: what a store made by the
-- ADR's migrations needs to be the store this code reads and writes. A store at that point may
-- hold starts: the tables rebuilt here keep their rows, and every projection (chain links,
-- outcomes, in-doubt starts) is derived from the log. Sections: the event store's new columns,
-- the start records rebuilt, the tables added, indexes, then the triggers grouped by the table
-- they guard. The PostgreSQL twin is pg-0031-start-barrier-schema.
--
-- The database refuses a forged history itself (R9.1), as any process may open the file: a
-- process that drops a trigger gets past it, and `verify` re-derives every head, link and row.

-- ============================================================================ the event store

-- Each event row holds the link of its stream's hash chain (R9.2, domain/eventChain.ts):
--   chain_digest = sha256(tag 0x00 previous 0x00 stream_id 0x00 position 0x00 event_id
--                  0x00 event_type 0x00 data_json 0x00 committed_at_ms), previous = '' at position 1.
-- SQLite has no sha256: the writer supplies the link and events_legal_append requires it.
ALTER TABLE events ADD COLUMN chain_digest TEXT;

-- Stored events get their links, stream by stream in position order. ql3_event_chain exists on
-- the migrator's connection only; the append-only trigger is made again below.
CREATE TEMP TABLE chain_fill (global_position INTEGER NOT NULL PRIMARY KEY, chain_digest TEXT NOT NULL);
INSERT INTO chain_fill (global_position, chain_digest)
WITH RECURSIVE chain (global_position, stream_id, stream_position, digest) AS (
  SELECT e.global_position, e.stream_id, e.stream_position,
         ql3_event_chain('', e.stream_id, e.stream_position, e.event_id, e.event_type, e.data_json, e.committed_at_ms)
    FROM events e WHERE e.stream_position = 1
  UNION ALL
  SELECT e.global_position, e.stream_id, e.stream_position,
         ql3_event_chain(c.digest, e.stream_id, e.stream_position, e.event_id, e.event_type, e.data_json, e.committed_at_ms)
    FROM chain c JOIN events e ON e.stream_id = c.stream_id AND e.stream_position = c.stream_position + 1
)
SELECT global_position, digest FROM chain;
DROP TRIGGER events_no_update;
DROP TRIGGER events_no_delete;
UPDATE events SET chain_digest = (SELECT f.chain_digest FROM chain_fill f WHERE f.global_position = events.global_position);
DROP TABLE temp.chain_fill;

-- Each ledger row binds its name, checksum and time (R9.2):
--   ledger_digest = fields_digest('qinglong/migration-ledger@v1', name, checksum, applied_at_ms),
-- written by the migrator after each plan it applies (this file's own row included).
ALTER TABLE schema_migrations ADD COLUMN ledger_digest TEXT CHECK (ledger_digest GLOB 'sha256:*' AND length(ledger_digest) = 71);

-- ====================================================================== the start records, rebuilt

-- Each fact is stored once: the canonical JSON of every start record is the data of its event
-- (chained, and decoded by every verified read), so the fact tables and the barrier keep their
-- mirror columns and keys and hold no copy of the JSON.
--
-- The replay identities of R4.1 are the facts' own keys: the barrier's start id and attempt, the
-- mutation, Trace, Audit event and Audit receipt ids (each fact table's primary key) and the
-- RunEvent id (the event's). Every fact a barrier names carries that barrier's start id, so a
-- fact binds at most one barrier and a reused identity meets the key that holds it.
--
-- A stored copy that differs from its event is refused here, rather than lose the evidence of
-- the difference.
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

-- SQLite drops a column constraint only by rebuilding the table. Each is copied aside, dropped
-- and made again under its own name, so other tables' foreign keys keep naming it; the drop's
-- dangling references are deferred and resolved by the copy back.
PRAGMA defer_foreign_keys = ON;

CREATE TEMP TABLE old_security_audit_events AS SELECT * FROM security_audit_events ORDER BY rowid;
CREATE TEMP TABLE old_trace_anchors AS SELECT * FROM trace_anchors ORDER BY rowid;
CREATE TEMP TABLE old_audit_receipts AS SELECT * FROM audit_receipts ORDER BY rowid;
CREATE TEMP TABLE old_step_run_mutations AS SELECT * FROM step_run_mutations ORDER BY rowid;
CREATE TEMP TABLE old_barriers AS SELECT * FROM tool_execution_start_barriers ORDER BY rowid;
-- the identities are the facts' own keys (above): no table of their own
DROP TABLE start_replay_identities;
DROP TABLE tool_execution_start_barriers;
DROP TABLE audit_receipts;
DROP TABLE step_run_mutations;
DROP TABLE trace_anchors;
DROP TABLE security_audit_events;

CREATE TABLE security_audit_events (
  audit_event_id     TEXT    NOT NULL PRIMARY KEY,
  start_id           TEXT    NOT NULL,
  run_id             TEXT    NOT NULL,
  step_run_id        TEXT    NOT NULL,
  audit_event_digest TEXT    NOT NULL,
  committed_at_ms    INTEGER NOT NULL
) STRICT;

CREATE TABLE trace_anchors (
  trace_id        TEXT    NOT NULL PRIMARY KEY,
  span_id         TEXT    NOT NULL,
  start_id        TEXT    NOT NULL,
  run_id          TEXT    NOT NULL,
  step_run_id     TEXT    NOT NULL,
  trace_digest    TEXT    NOT NULL,
  committed_at_ms INTEGER NOT NULL
) STRICT;

CREATE TABLE audit_receipts (
  audit_receipt_id TEXT    NOT NULL PRIMARY KEY,
  audit_event_id   TEXT    NOT NULL REFERENCES security_audit_events (audit_event_id),
  trace_id         TEXT    NOT NULL REFERENCES trace_anchors (trace_id),
  start_id         TEXT    NOT NULL,
  receipt_digest   TEXT    NOT NULL,
  committed_at_ms  INTEGER NOT NULL
) STRICT;

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

INSERT INTO security_audit_events SELECT audit_event_id, start_id, run_id, step_run_id, audit_event_digest, committed_at_ms
  FROM temp.old_security_audit_events;
INSERT INTO trace_anchors SELECT trace_id, span_id, start_id, run_id, step_run_id, trace_digest, committed_at_ms
  FROM temp.old_trace_anchors;
INSERT INTO audit_receipts SELECT audit_receipt_id, audit_event_id, trace_id, start_id, receipt_digest, committed_at_ms
  FROM temp.old_audit_receipts;
INSERT INTO step_run_mutations SELECT mutation_id, run_event_id, start_id, run_id, step_run_id, from_status, to_status, from_version, to_version,
    run_event_sequence, mutation_digest, started_step_run_digest, requested_at_ms, committed_at_ms
  FROM temp.old_step_run_mutations;
INSERT INTO tool_execution_start_barriers SELECT start_id, command_digest, barrier_digest, project_id, run_id, step_run_id, started_step_run_version,
    started_step_run_digest, mutation_id, mutation_digest, run_event_id, trace_id, trace_digest, audit_event_id, audit_receipt_id,
    audit_receipt_digest, adapter_id, committed_at_ms
  FROM temp.old_barriers;
DROP TABLE temp.old_security_audit_events;
DROP TABLE temp.old_trace_anchors;
DROP TABLE temp.old_audit_receipts;
DROP TABLE temp.old_step_run_mutations;
DROP TABLE temp.old_barriers;

PRAGMA defer_foreign_keys = OFF;

-- ==================================================================================== tables added

-- Every start is whole at commit: each fact row of a start names it here, and the deferred
-- foreign key refuses the commit of a start whose barrier is missing.
CREATE TABLE start_whole_at_commit (
  start_id TEXT NOT NULL PRIMARY KEY REFERENCES tool_execution_start_barriers (start_id) DEFERRABLE INITIALLY DEFERRED
) STRICT, WITHOUT ROWID;
INSERT INTO start_whole_at_commit (start_id) SELECT start_id FROM tool_execution_start_barriers;

-- The outcome of each start (completed, failed, lost), projected from its event by the database
-- itself. A barrier without a row here is in doubt: its adapter may or may not have acted.
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

-- The starts with no outcome, kept by the database in the statements that insert the barrier
-- and the outcome, and indexed in listing order: a page of N in-doubt starts is N index entries.
CREATE TABLE in_doubt_starts (
  start_id        TEXT    NOT NULL PRIMARY KEY REFERENCES tool_execution_start_barriers (start_id),
  project_id      TEXT    NOT NULL,
  run_id          TEXT    NOT NULL,
  committed_at_ms INTEGER NOT NULL
) STRICT;
INSERT INTO in_doubt_starts (start_id, project_id, run_id, committed_at_ms)
  SELECT b.start_id, b.project_id, b.run_id, b.committed_at_ms FROM tool_execution_start_barriers b
   WHERE NOT EXISTS (SELECT 1 FROM start_outcomes o WHERE o.start_id = b.start_id);

-- A person's note on an outcome (R10.2), kept apart from the evidence: the outcome event binds
-- only the note's digest, so the text may be purged (set to NULL, stamped, the purge bound by
--   purge_digest = fields_digest('qinglong/note-purge@v1', start_id, note_digest, purged_at_ms))
-- and every digest stays intact.
CREATE TABLE resolution_notes (
  start_id     TEXT    NOT NULL,
  note_digest  TEXT    NOT NULL CHECK (note_digest GLOB 'sha256:*' AND length(note_digest) = 71),
  note_text    TEXT,
  purged_at_ms INTEGER,
  purge_digest TEXT    CHECK (purge_digest GLOB 'sha256:*' AND length(purge_digest) = 71),
  PRIMARY KEY (start_id, note_digest),
  CHECK ((note_text IS NULL) = (purged_at_ms IS NOT NULL))
) STRICT;

-- One driver per attempt (R11.2): the lease a saga takes on a committed start before it may
-- invoke its adapter, as facts: a claim (generation N, leased until a database-clock time) and
-- its release. Each row binds its cells by
--   claim_digest = fields_digest('qinglong/driver-claim@v1', start_id, generation, kind, driver_id, at_ms, lease_until_ms).
CREATE TABLE adapter_driver_claims (
  start_id       TEXT    NOT NULL REFERENCES tool_execution_start_barriers (start_id),
  generation     INTEGER NOT NULL CHECK (generation >= 1),
  kind           TEXT    NOT NULL CHECK (kind IN ('claim', 'release')),
  driver_id      TEXT    NOT NULL,
  at_ms          INTEGER NOT NULL,
  lease_until_ms INTEGER NOT NULL,
  claim_digest   TEXT    CHECK (claim_digest GLOB 'sha256:*' AND length(claim_digest) = 71),
  PRIMARY KEY (start_id, generation, kind)
) STRICT;

-- Keyed evidence (R9.4), written only with a deployment key (the key itself is never stored):
-- HMAC-SHA-256 over each barrier's digests, and over each span of Run events one transaction
-- appended. The seal origin says from where sealing starts; `legacy_gaps` freezes, under its
-- MAC, the positions below it that held no event, so no event can be placed into the past.
CREATE TABLE start_evidence_macs (
  start_id TEXT NOT NULL PRIMARY KEY REFERENCES tool_execution_start_barriers (start_id),
  key_id   TEXT NOT NULL CHECK (length(key_id) BETWEEN 1 AND 64),
  mac      TEXT NOT NULL CHECK (length(mac) = 64)
) STRICT;

CREATE TABLE run_event_macs (
  stream_id     TEXT NOT NULL,
  from_position INTEGER NOT NULL CHECK (from_position >= 1),
  to_position   INTEGER NOT NULL CHECK (to_position >= from_position),
  key_id        TEXT NOT NULL CHECK (length(key_id) BETWEEN 1 AND 64),
  mac           TEXT NOT NULL CHECK (length(mac) = 64),
  PRIMARY KEY (stream_id, from_position)
) STRICT, WITHOUT ROWID;

CREATE TABLE run_event_seal_origins (
  key_id               TEXT    NOT NULL PRIMARY KEY CHECK (length(key_id) BETWEEN 1 AND 64),
  from_global_position INTEGER NOT NULL CHECK (from_global_position >= 1),
  from_ms              INTEGER NOT NULL,
  mac                  TEXT    NOT NULL CHECK (length(mac) = 64),
  legacy_gaps          TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(legacy_gaps) AND json_type(legacy_gaps) = 'array')
) STRICT;

-- The sealed invocation plan of a start (R12.2), beside the evidence and outside it: AES-256-GCM
-- bytes under a key id, the plan digest the barrier binds and a redacted preview. Shredding (the
-- bytes and key id set to NULL) leaves every digest intact.
CREATE TABLE invocation_plans (
  start_id     TEXT NOT NULL PRIMARY KEY REFERENCES tool_execution_start_barriers (start_id),
  plan_digest  TEXT NOT NULL CHECK (plan_digest GLOB 'sha256:*' AND length(plan_digest) = 71),
  key_id       TEXT,
  nonce        BLOB,
  ciphertext   BLOB,
  preview_json TEXT NOT NULL,
  CHECK ((key_id IS NULL) = (ciphertext IS NULL) AND (nonce IS NULL) = (ciphertext IS NULL))
) STRICT;

-- Retention (R14.2): a finished Run compacted into one record that binds, by digest, all that
-- was removed; the identities of its starts stay, so they still refuse reuse and an exact replay
-- answers START_COMPACTED. Written only where ql3_retention_gate() is registered (the retention
-- path's own connection): on any other the insert does not even prepare.
CREATE TABLE run_compactions (
  run_id            TEXT NOT NULL PRIMARY KEY,
  record_json       TEXT NOT NULL CHECK (json_valid(record_json)),
  compaction_digest TEXT NOT NULL CHECK (compaction_digest GLOB 'sha256:*' AND length(compaction_digest) = 71)
) STRICT;

CREATE TABLE compacted_identities (
  identity       TEXT NOT NULL CHECK (identity IN ('startId', 'mutationId', 'runEventId', 'traceId', 'auditEventId', 'auditReceiptId', 'attempt')),
  value          TEXT NOT NULL,
  start_id       TEXT NOT NULL,
  run_id         TEXT NOT NULL REFERENCES run_compactions (run_id),
  command_digest TEXT NOT NULL,
  barrier_digest TEXT NOT NULL,
  PRIMARY KEY (identity, value)
) STRICT, WITHOUT ROWID;

-- ========================================================================================= indexes

-- One barrier per attempt (R4.1, R5.4): the attempt's key.
CREATE UNIQUE INDEX tool_execution_start_barriers_attempt ON tool_execution_start_barriers (run_id, step_run_id, started_step_run_version);
-- `verify` proves that no evidence exists without its StepRun move.
CREATE INDEX step_run_mutations_start ON step_run_mutations (start_id);
-- A StepRun has one event per version (the log's own key for its moves).
CREATE UNIQUE INDEX events_step_run_version ON events (stream_id, json_extract(data_json, '$.stepRunId'), json_extract(data_json, '$.stepRunVersion'))
  WHERE event_type IN ('StepRunCreated', 'StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed');
-- Recovery lists the oldest starts in doubt, whole, per Project and per Run.
CREATE INDEX in_doubt_starts_listing ON in_doubt_starts (committed_at_ms, start_id);
CREATE INDEX in_doubt_starts_project ON in_doubt_starts (project_id, committed_at_ms, start_id);
CREATE INDEX in_doubt_starts_run ON in_doubt_starts (run_id, committed_at_ms, start_id);
-- A page that lists its whole scope reads the running StepRuns alone.
CREATE INDEX step_runs_running ON step_runs (run_id, step_run_id) WHERE status = 'running';

-- ======================================================================================== triggers
-- Append-only tables refuse every update; a delete is let through only for a compacted Run's
-- rows, its compaction record written first in the same transaction (R14.2).

-- ---------------------------------------------------------------------------------------- streams
-- a head moves forward only, to the last position of its log; a compacted Run is never written again
CREATE TRIGGER streams_legal_move BEFORE UPDATE ON streams
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a stream head moves forward to the last position of its log (R9.1)')
   WHERE NEW.stream_id IS NOT OLD.stream_id OR NEW.stream_type IS NOT OLD.stream_type OR NEW.version <= OLD.version
      OR NEW.version IS NOT (SELECT max(e.stream_position) FROM events e WHERE e.stream_id = NEW.stream_id);
END;
CREATE TRIGGER streams_not_compacted BEFORE INSERT ON streams
  WHEN EXISTS (SELECT 1 FROM run_compactions c WHERE 'run-' || c.run_id = NEW.stream_id)
BEGIN SELECT RAISE(ABORT, 'illegal history refused: a compacted Run is never written again (R14.2)'); END;
CREATE TRIGGER streams_no_delete BEFORE DELETE ON streams WHEN NOT EXISTS (SELECT 1 FROM run_compactions c WHERE 'run-' || c.run_id = OLD.stream_id)
BEGIN SELECT RAISE(ABORT, 'illegal history refused: a stream head is never deleted (R9.1)'); END;

-- ----------------------------------------------------------------------------------------- events
-- A move's events are appended first, then its heads move. An event continues its stream with no
-- gap at the next global position, carries its chain link, and the five facts of a start come
-- together, in order, under one startId and the event ids their facts name; a barrier matches
-- the StepRunStarted before it, authorises what the Run's log made, and is committed only once
-- its StepRun runs that very attempt.
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_legal_append BEFORE INSERT ON events
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a chain link is required (R9.2)')
   WHERE NEW.chain_digest IS NULL OR length(NEW.chain_digest) <> 71 OR substr(NEW.chain_digest, 1, 7) <> 'sha256:';
  SELECT RAISE(ABORT, 'illegal history refused: the stream position leaves a gap (R9.1)')
   WHERE NEW.stream_position <> coalesce((SELECT max(e.stream_position) FROM events e WHERE e.stream_id = NEW.stream_id), 0) + 1;
  SELECT RAISE(ABORT, 'illegal history refused: a Run stream is opened by its RunCreated, once (R9.1)')
   WHERE (NEW.stream_position = 1) <> (NEW.event_type = 'RunCreated')
      OR (NEW.event_type = 'RunCreated' AND NEW.stream_id <> 'run-' || json_extract(NEW.data_json, '$.runId'));
  SELECT RAISE(ABORT, 'illegal history refused: the five facts of a start go together, in order, under one startId (R9.1)')
    FROM (SELECT (SELECT p.event_type FROM events p WHERE p.stream_id = NEW.stream_id AND p.stream_position = NEW.stream_position - 1) AS prev_type,
                 (SELECT json_extract(p.data_json, '$.startId') FROM events p WHERE p.stream_id = NEW.stream_id AND p.stream_position = NEW.stream_position - 1) AS prev_start,
                 coalesce(json_extract(NEW.data_json, '$.startId'), json_extract(NEW.data_json, '$.barrier.startId')) AS start_id) x
   WHERE CASE x.prev_type
           WHEN 'SecurityAuditEventRecorded' THEN NEW.event_type <> 'TraceAnchorRecorded' OR x.start_id IS NOT x.prev_start
           WHEN 'TraceAnchorRecorded' THEN NEW.event_type <> 'AuditReceiptIssued' OR x.start_id IS NOT x.prev_start
           WHEN 'AuditReceiptIssued' THEN NEW.event_type <> 'StepRunStarted' OR x.start_id IS NOT x.prev_start
           WHEN 'StepRunStarted' THEN NEW.event_type <> 'ToolExecutionStartBarrierCommitted' OR x.start_id IS NOT x.prev_start
           ELSE NEW.event_type IN ('TraceAnchorRecorded', 'AuditReceiptIssued', 'StepRunStarted', 'ToolExecutionStartBarrierCommitted')
         END;
  SELECT RAISE(ABORT, 'illegal history refused: the event id is not the one its fact names (R9.1)')
   WHERE NEW.event_id IS NOT CASE NEW.event_type
           WHEN 'SecurityAuditEventRecorded' THEN 'audit:' || json_extract(NEW.data_json, '$.auditEventId')
           WHEN 'TraceAnchorRecorded' THEN 'trace:' || json_extract(NEW.data_json, '$.traceId')
           WHEN 'AuditReceiptIssued' THEN 'receipt:' || json_extract(NEW.data_json, '$.auditReceiptId')
           WHEN 'StepRunStarted' THEN json_extract(NEW.data_json, '$.runEventId')
           WHEN 'ToolExecutionStartBarrierCommitted' THEN 'barrier:' || json_extract(NEW.data_json, '$.barrier.startId')
           ELSE NEW.event_id END;
  SELECT RAISE(ABORT, 'illegal history refused: the barrier does not match the StepRunStarted before it (R9.1)')
    FROM events p
   WHERE NEW.event_type = 'ToolExecutionStartBarrierCommitted' AND p.stream_id = NEW.stream_id AND p.stream_position = NEW.stream_position - 1
     AND (json_extract(NEW.data_json, '$.barrier.runId') IS NOT json_extract(p.data_json, '$.runId')
       OR json_extract(NEW.data_json, '$.barrier.stepRunId') IS NOT json_extract(p.data_json, '$.stepRunId')
       OR json_extract(NEW.data_json, '$.barrier.attempt.fromStatus') IS NOT json_extract(p.data_json, '$.fromStatus')
       OR json_extract(NEW.data_json, '$.barrier.attempt.fromStepRunVersion') IS NOT json_extract(p.data_json, '$.fromStepRunVersion')
       OR json_extract(NEW.data_json, '$.barrier.attempt.fromStepRunDigest') IS NOT json_extract(p.data_json, '$.fromStepRunDigest')
       OR json_extract(NEW.data_json, '$.barrier.attempt.startedStepRunVersion') IS NOT json_extract(p.data_json, '$.stepRunVersion')
       OR json_extract(NEW.data_json, '$.barrier.attempt.startedStepRunDigest') IS NOT json_extract(p.data_json, '$.startedStepRunDigest')
       OR json_extract(NEW.data_json, '$.barrier.mutation.mutationId') IS NOT json_extract(p.data_json, '$.mutationId')
       OR json_extract(NEW.data_json, '$.barrier.mutation.mutationDigest') IS NOT json_extract(p.data_json, '$.mutationDigest')
       OR json_extract(NEW.data_json, '$.barrier.runEvent.runEventId') IS NOT json_extract(p.data_json, '$.runEventId')
       OR json_extract(NEW.data_json, '$.barrier.runEvent.runEventSequence') IS NOT json_extract(p.data_json, '$.runEventSequence'));
  -- the StepRun move is made before the barrier is committed: its head runs this very attempt
  SELECT RAISE(ABORT, 'illegal history refused: a barrier whose StepRun did not move to running for it (R9.1)')
   WHERE NEW.event_type = 'ToolExecutionStartBarrierCommitted'
     AND NOT EXISTS (SELECT 1 FROM step_runs h
                      WHERE h.run_id = json_extract(NEW.data_json, '$.barrier.runId') AND h.step_run_id = json_extract(NEW.data_json, '$.barrier.stepRunId')
                        AND h.status = 'running' AND h.version = json_extract(NEW.data_json, '$.barrier.attempt.startedStepRunVersion')
                        AND h.digest = json_extract(NEW.data_json, '$.barrier.attempt.startedStepRunDigest')
                        AND json_extract(h.state_json, '$.lastStartId') = json_extract(NEW.data_json, '$.barrier.startId'));
END;
CREATE TRIGGER events_step_run_from_head BEFORE INSERT ON events
  WHEN NEW.event_type IN ('StepRunCreated', 'StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed')
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a StepRun event names the Run of its stream (R9.1)')
   WHERE NEW.stream_id IS NOT 'run-' || json_extract(NEW.data_json, '$.runId');
  SELECT RAISE(ABORT, 'illegal history refused: a StepRun is created once, at version 1 (R9.1)')
   WHERE NEW.event_type = 'StepRunCreated'
     AND (json_extract(NEW.data_json, '$.stepRunVersion') IS NOT 1
       OR EXISTS (SELECT 1 FROM step_runs h WHERE h.run_id = json_extract(NEW.data_json, '$.runId') AND h.step_run_id = json_extract(NEW.data_json, '$.stepRunId')));
  SELECT RAISE(ABORT, 'illegal history refused: a StepRun event moves its head one version, by a transition the lifecycle allows (R9.1)')
   WHERE NEW.event_type <> 'StepRunCreated'
     AND NOT EXISTS (SELECT 1 FROM step_runs h
                      WHERE h.run_id = json_extract(NEW.data_json, '$.runId') AND h.step_run_id = json_extract(NEW.data_json, '$.stepRunId')
                        AND h.version = json_extract(NEW.data_json, '$.stepRunVersion') - 1
                        AND (h.status || '>' || CASE NEW.event_type WHEN 'StepRunReady' THEN 'ready' WHEN 'StepRunAwaitingApproval' THEN 'waiting_approval'
                               WHEN 'StepRunStarted' THEN 'running' WHEN 'StepRunLost' THEN 'lost' WHEN 'StepRunCompleted' THEN 'completed' WHEN 'StepRunFailed' THEN 'failed' END)
                            IN ('created>ready', 'lost>ready', 'created>waiting_approval', 'lost>waiting_approval',
                                'ready>running', 'waiting_approval>running', 'running>lost', 'running>completed', 'running>failed'));
END;
CREATE TRIGGER events_step_run_follows_log BEFORE INSERT ON events
  WHEN NEW.event_type IN ('StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed')
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a StepRun event follows the last event of its StepRun in the log, by a move the lifecycle allows; the StepRun head is not where its log ends (R9.1)')
   WHERE NOT EXISTS (
           SELECT 1 FROM events p
            WHERE p.stream_id = NEW.stream_id
              AND p.event_type IN ('StepRunCreated', 'StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed')
              AND json_extract(p.data_json, '$.stepRunId') = json_extract(NEW.data_json, '$.stepRunId')
              AND json_extract(p.data_json, '$.stepRunVersion') = json_extract(NEW.data_json, '$.stepRunVersion') - 1
              AND (p.event_type || '>' || NEW.event_type) IN (
                    'StepRunCreated>StepRunReady', 'StepRunLost>StepRunReady', 'StepRunCreated>StepRunAwaitingApproval', 'StepRunLost>StepRunAwaitingApproval',
                    'StepRunReady>StepRunStarted', 'StepRunAwaitingApproval>StepRunStarted',
                    'StepRunStarted>StepRunLost', 'StepRunStarted>StepRunCompleted', 'StepRunStarted>StepRunFailed')
              AND (NEW.event_type NOT IN ('StepRunLost', 'StepRunCompleted', 'StepRunFailed')
                   OR json_extract(p.data_json, '$.startId') IS json_extract(NEW.data_json, '$.startId')));
END;
CREATE TRIGGER events_start_follows_log BEFORE INSERT ON events
  WHEN NEW.event_type = 'ToolExecutionStartBarrierCommitted' AND NOT (
    EXISTS (
      SELECT 1 FROM events r
       WHERE r.stream_id = NEW.stream_id AND r.stream_position = 1 AND r.event_type = 'RunCreated'
         AND json_extract(r.data_json, '$.projectId') IS json_extract(NEW.data_json, '$.barrier.projectId')
         AND json_extract(r.data_json, '$.snapshotId') IS json_extract(NEW.data_json, '$.barrier.snapshotId')
         AND json_extract(r.data_json, '$.snapshotDigest') IS json_extract(NEW.data_json, '$.barrier.snapshotDigest'))
    AND EXISTS (
      SELECT 1 FROM events c
       WHERE c.stream_id = NEW.stream_id
         AND json_extract(c.data_json, '$.stepRunId') = json_extract(NEW.data_json, '$.barrier.stepRunId')
         AND json_extract(c.data_json, '$.stepRunVersion') = 1
         AND c.event_type IN ('StepRunCreated', 'StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed')
         AND c.event_type = 'StepRunCreated'
         AND json_extract(c.data_json, '$.kind') = 'tool'
         AND json_extract(c.data_json, '$.toolDefinition') IS json_extract(NEW.data_json, '$.barrier.toolDefinition'))
    AND EXISTS (
      SELECT 1 FROM events m
       WHERE m.stream_id = NEW.stream_id
         AND json_extract(m.data_json, '$.stepRunId') = json_extract(NEW.data_json, '$.barrier.stepRunId')
         AND json_extract(m.data_json, '$.stepRunVersion') = json_extract(NEW.data_json, '$.barrier.attempt.fromStepRunVersion')
         AND m.event_type IN ('StepRunCreated', 'StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed')
         AND m.event_type IN ('StepRunReady', 'StepRunAwaitingApproval')
         AND json_extract(m.data_json, '$.approval') IS json_extract(NEW.data_json, '$.barrier.approval')))
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a start authorises what the Run''s log made: its Project, snapshot, tool definition and approval (R9.1)');
END;
CREATE TRIGGER events_position_is_next AFTER INSERT ON events
  WHEN NEW.global_position < 1 OR NEW.global_position < (SELECT max(global_position) FROM events)
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: an event''s global position is the next one, never below one already taken (R14.1)');
END;
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
CREATE TRIGGER events_start_whole AFTER INSERT ON events WHEN NEW.event_type = 'SecurityAuditEventRecorded'
BEGIN INSERT OR IGNORE INTO start_whole_at_commit (start_id) VALUES (json_extract(NEW.data_json, '$.startId')); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events WHEN NOT EXISTS (SELECT 1 FROM run_compactions c WHERE 'run-' || c.run_id = OLD.stream_id)
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;

-- ------------------------------------------------------------------------------------------- runs
CREATE TRIGGER runs_legal_move BEFORE UPDATE ON runs
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a Run head moves forward to the last position of its log, nothing else changes (R9.1)')
   WHERE NEW.run_id IS NOT OLD.run_id OR NEW.project_id IS NOT OLD.project_id OR NEW.snapshot_id IS NOT OLD.snapshot_id
      OR NEW.snapshot_digest IS NOT OLD.snapshot_digest OR NEW.version <= OLD.version
      OR NEW.version IS NOT (SELECT max(e.stream_position) FROM events e WHERE e.stream_id = 'run-' || NEW.run_id);
END;
CREATE TRIGGER runs_no_delete BEFORE DELETE ON runs WHEN NOT EXISTS (SELECT 1 FROM run_compactions c WHERE c.run_id = OLD.run_id)
BEGIN SELECT RAISE(ABORT, 'illegal history refused: a Run head is never deleted (R9.1)'); END;

-- -------------------------------------------------------------------------------------- step_runs
-- only by a transition the lifecycle allows, one version at a time, backed by the StepRun event
-- just appended, with its state JSON mirroring it
CREATE TRIGGER step_runs_legal_move BEFORE UPDATE ON step_runs
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a StepRun moves one version at a time, by a transition the lifecycle allows (R9.1)')
   WHERE NEW.run_id IS NOT OLD.run_id OR NEW.step_run_id IS NOT OLD.step_run_id OR NEW.project_id IS NOT OLD.project_id
      OR NEW.kind IS NOT OLD.kind OR NEW.version IS NOT OLD.version + 1
      OR (OLD.status || '>' || NEW.status) NOT IN ('created>ready', 'lost>ready', 'created>waiting_approval', 'lost>waiting_approval',
            'ready>running', 'waiting_approval>running', 'running>lost', 'running>completed', 'running>failed')
      OR json_extract(NEW.state_json, '$.status') IS NOT NEW.status OR json_extract(NEW.state_json, '$.version') IS NOT NEW.version
      OR json_extract(NEW.state_json, '$.runId') IS NOT NEW.run_id OR json_extract(NEW.state_json, '$.stepRunId') IS NOT NEW.step_run_id
      OR json_extract(NEW.state_json, '$.projectId') IS NOT NEW.project_id OR json_extract(NEW.state_json, '$.kind') IS NOT NEW.kind
      OR json_extract(NEW.state_json, '$.toolDefinition') IS NOT json_extract(OLD.state_json, '$.toolDefinition');
  -- the StepRun event just appended (the last of its stream) is this very move
  SELECT RAISE(ABORT, 'illegal history refused: a StepRun move without its event (R9.1)')
    FROM (SELECT e.event_type, e.data_json FROM events e
           WHERE e.stream_id = 'run-' || NEW.run_id ORDER BY e.stream_position DESC LIMIT 1) last
   WHERE last.event_type IS NOT CASE NEW.status WHEN 'ready' THEN 'StepRunReady' WHEN 'waiting_approval' THEN 'StepRunAwaitingApproval'
           WHEN 'running' THEN 'StepRunStarted' WHEN 'lost' THEN 'StepRunLost' WHEN 'completed' THEN 'StepRunCompleted' WHEN 'failed' THEN 'StepRunFailed' END
      OR json_extract(last.data_json, '$.stepRunId') IS NOT NEW.step_run_id
      OR json_extract(last.data_json, '$.stepRunVersion') IS NOT NEW.version
      OR (NEW.status = 'waiting_approval' AND json_extract(last.data_json, '$.approval') IS NOT json_extract(NEW.state_json, '$.approval'))
      OR (NEW.status = 'running' AND (json_extract(last.data_json, '$.startedStepRunDigest') IS NOT NEW.digest
            OR json_extract(last.data_json, '$.fromStepRunDigest') IS NOT OLD.digest
            OR json_extract(last.data_json, '$.fromStatus') IS NOT OLD.status
            OR json_extract(last.data_json, '$.startId') IS NOT json_extract(NEW.state_json, '$.lastStartId')))
      OR (NEW.status IN ('lost', 'completed', 'failed') AND json_extract(last.data_json, '$.startId') IS NOT json_extract(OLD.state_json, '$.lastStartId'));
  SELECT RAISE(ABORT, 'illegal history refused: a StepRun move without its event (R9.1)')
   WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.stream_id = 'run-' || NEW.run_id);
END;
CREATE TRIGGER step_runs_no_delete BEFORE DELETE ON step_runs WHEN NOT EXISTS (SELECT 1 FROM run_compactions c WHERE c.run_id = OLD.run_id)
BEGIN SELECT RAISE(ABORT, 'illegal history refused: a StepRun is never deleted (R9.1)'); END;

-- ------------------------------------------------------------------ the four facts of a start
-- each row beside its own event in the log, and named in start_whole_at_commit
CREATE TRIGGER security_audit_events_no_update BEFORE UPDATE ON security_audit_events BEGIN SELECT RAISE(ABORT, 'security audit events are append-only'); END;
CREATE TRIGGER security_audit_events_beside_their_event BEFORE INSERT ON security_audit_events
  WHEN NOT EXISTS (
    SELECT 1 FROM events e
     WHERE e.event_id = 'audit:' || NEW.audit_event_id AND e.event_type = 'SecurityAuditEventRecorded'
       AND e.stream_id = 'run-' || NEW.run_id AND json_extract(e.data_json, '$.startId') IS NEW.start_id)
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a security audit event row has no event of its own in the log (R9.1)');
END;
CREATE TRIGGER security_audit_events_start_whole AFTER INSERT ON security_audit_events
BEGIN INSERT OR IGNORE INTO start_whole_at_commit (start_id) VALUES (NEW.start_id); END;
CREATE TRIGGER security_audit_events_no_delete BEFORE DELETE ON security_audit_events WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'security audit events are append-only'); END;

CREATE TRIGGER trace_anchors_no_update BEFORE UPDATE ON trace_anchors BEGIN SELECT RAISE(ABORT, 'trace anchors are append-only'); END;
CREATE TRIGGER trace_anchors_beside_their_event BEFORE INSERT ON trace_anchors
  WHEN NOT EXISTS (
    SELECT 1 FROM events e
     WHERE e.event_id = 'trace:' || NEW.trace_id AND e.event_type = 'TraceAnchorRecorded'
       AND e.stream_id = 'run-' || NEW.run_id AND json_extract(e.data_json, '$.startId') IS NEW.start_id)
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a trace anchor row has no event of its own in the log (R9.1)');
END;
CREATE TRIGGER trace_anchors_start_whole AFTER INSERT ON trace_anchors
BEGIN INSERT OR IGNORE INTO start_whole_at_commit (start_id) VALUES (NEW.start_id); END;
CREATE TRIGGER trace_anchors_no_delete BEFORE DELETE ON trace_anchors WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'trace anchors are append-only'); END;

CREATE TRIGGER audit_receipts_no_update BEFORE UPDATE ON audit_receipts BEGIN SELECT RAISE(ABORT, 'audit receipts are append-only'); END;
CREATE TRIGGER audit_receipts_beside_their_event BEFORE INSERT ON audit_receipts
  WHEN NOT EXISTS (
    SELECT 1 FROM events e
     WHERE e.event_id = 'receipt:' || NEW.audit_receipt_id AND e.event_type = 'AuditReceiptIssued'
       AND json_extract(e.data_json, '$.startId') IS NEW.start_id)
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: an audit receipt row has no event of its own in the log (R9.1)');
END;
CREATE TRIGGER audit_receipts_start_whole AFTER INSERT ON audit_receipts
BEGIN INSERT OR IGNORE INTO start_whole_at_commit (start_id) VALUES (NEW.start_id); END;
CREATE TRIGGER audit_receipts_no_delete BEFORE DELETE ON audit_receipts WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'audit receipts are append-only'); END;

CREATE TRIGGER step_run_mutations_no_update BEFORE UPDATE ON step_run_mutations BEGIN SELECT RAISE(ABORT, 'the mutation ledger is append-only'); END;
CREATE TRIGGER step_run_mutations_beside_their_event BEFORE INSERT ON step_run_mutations
  WHEN NOT EXISTS (
    SELECT 1 FROM events e
     WHERE e.event_id = NEW.run_event_id AND e.event_type = 'StepRunStarted'
       AND e.stream_id = 'run-' || NEW.run_id AND json_extract(e.data_json, '$.startId') IS NEW.start_id
       AND json_extract(e.data_json, '$.mutationId') IS NEW.mutation_id)
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a StepRun mutation row has no event of its own in the log (R9.1)');
END;
CREATE TRIGGER step_run_mutations_start_whole AFTER INSERT ON step_run_mutations
BEGIN INSERT OR IGNORE INTO start_whole_at_commit (start_id) VALUES (NEW.start_id); END;
CREATE TRIGGER step_run_mutations_no_delete BEFORE DELETE ON step_run_mutations WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'the mutation ledger is append-only'); END;

-- -------------------------------------------------------------------------- the start barrier
-- immutable, inserted after its own event and facts, each of which carries its start id; its
-- insert writes its in-doubt row
CREATE TRIGGER tool_execution_start_barriers_no_update BEFORE UPDATE ON tool_execution_start_barriers BEGIN SELECT RAISE(ABORT, 'start barriers are immutable'); END;
CREATE TRIGGER tool_execution_start_barriers_with_event BEFORE INSERT ON tool_execution_start_barriers
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a barrier row without its barrier event (R9.1)')
   WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.event_id = 'barrier:' || NEW.start_id
                       AND json_extract(e.data_json, '$.barrierDigest') = NEW.barrier_digest);
END;
CREATE TRIGGER tool_execution_start_barriers_own_facts BEFORE INSERT ON tool_execution_start_barriers
  WHEN NOT EXISTS (SELECT 1 FROM step_run_mutations m WHERE m.mutation_id = NEW.mutation_id AND m.start_id = NEW.start_id)
    OR NOT EXISTS (SELECT 1 FROM events e WHERE e.event_id = NEW.run_event_id AND e.event_type = 'StepRunStarted'
                     AND json_extract(e.data_json, '$.startId') IS NEW.start_id)
    OR NOT EXISTS (SELECT 1 FROM trace_anchors t WHERE t.trace_id = NEW.trace_id AND t.start_id = NEW.start_id)
    OR NOT EXISTS (SELECT 1 FROM security_audit_events a WHERE a.audit_event_id = NEW.audit_event_id AND a.start_id = NEW.start_id)
    OR NOT EXISTS (SELECT 1 FROM audit_receipts r WHERE r.audit_receipt_id = NEW.audit_receipt_id AND r.start_id = NEW.start_id)
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a barrier names the facts of its own start only (R4.1, R9.1)');
END;
CREATE TRIGGER in_doubt_starts_from_barrier AFTER INSERT ON tool_execution_start_barriers
BEGIN
  INSERT INTO in_doubt_starts (start_id, project_id, run_id, committed_at_ms)
    VALUES (NEW.start_id, NEW.project_id, NEW.run_id, NEW.committed_at_ms);
END;
CREATE TRIGGER tool_execution_start_barriers_no_delete BEFORE DELETE ON tool_execution_start_barriers WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'start barriers are immutable'); END;

-- ----------------------------------------------------------------------------------- outcomes
-- facts: a later decision is a new event, never an edit; each row is the image of its event
CREATE TRIGGER start_outcomes_no_update BEFORE UPDATE ON start_outcomes BEGIN SELECT RAISE(ABORT, 'start outcomes are facts: append a new event instead'); END;
CREATE TRIGGER start_outcomes_project_their_event BEFORE INSERT ON start_outcomes
  WHEN NOT EXISTS (
    SELECT 1 FROM events e
     WHERE e.event_id = NEW.event_id
       AND e.stream_id = 'run-' || NEW.run_id
       AND e.stream_position = NEW.stream_position
       AND e.committed_at_ms = NEW.committed_at_ms
       AND NEW.outcome IS (CASE e.event_type WHEN 'StepRunCompleted' THEN 'completed' WHEN 'StepRunFailed' THEN 'failed' WHEN 'StepRunLost' THEN 'lost' END)
       AND json_extract(e.data_json, '$.startId') IS NEW.start_id
       AND json_extract(e.data_json, '$.runId') IS NEW.run_id
       AND json_extract(e.data_json, '$.stepRunId') IS NEW.step_run_id
       AND json_extract(e.data_json, '$.stepRunVersion') IS NEW.step_run_version
       AND json_extract(e.data_json, '$.resolution.decidedBy') IS NEW.decided_by
       AND json_extract(e.data_json, '$.resolution.reason') IS NEW.reason
       AND json_extract(e.data_json, '$.outcomeDigest') IS NEW.outcome_digest
       AND json_extract(e.data_json, '$.occurredAtMs') IS NEW.requested_at_ms)
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a start outcome row is the projection of its outcome event (R9.1)');
END;
CREATE TRIGGER in_doubt_starts_leave_on_outcome AFTER INSERT ON start_outcomes
BEGIN
  DELETE FROM in_doubt_starts WHERE start_id = NEW.start_id;
END;
CREATE TRIGGER start_outcomes_no_delete BEFORE DELETE ON start_outcomes WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'start outcomes are facts: append a new event instead'); END;

-- ---------------------------------------------------------------------------- in-doubt starts
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

-- ---------------------------------------------------------------------------- resolution notes
-- the only change a note may see is its purge
CREATE TRIGGER resolution_notes_purge_only BEFORE UPDATE ON resolution_notes
  WHEN NOT (OLD.note_text IS NOT NULL AND NEW.note_text IS NULL AND NEW.purged_at_ms IS NOT NULL AND NEW.purge_digest IS NOT NULL
            AND NEW.start_id = OLD.start_id AND NEW.note_digest = OLD.note_digest)
  BEGIN SELECT RAISE(ABORT, 'a resolution note can only be purged'); END;
CREATE TRIGGER resolution_notes_no_delete BEFORE DELETE ON resolution_notes WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'a resolution note is purged, never deleted: its digest stays bound'); END;

-- ------------------------------------------------------------------------------ driver claims
-- the next generation only, once the one before it ended (released, or its lease ran out)
CREATE TRIGGER adapter_driver_claims_no_update BEFORE UPDATE ON adapter_driver_claims BEGIN SELECT RAISE(ABORT, 'driver claims are facts: append a new generation instead'); END;
CREATE TRIGGER adapter_driver_claims_digest_required BEFORE INSERT ON adapter_driver_claims WHEN NEW.claim_digest IS NULL
  BEGIN SELECT RAISE(ABORT, 'a driver claim binds its cells by claim_digest'); END;
CREATE TRIGGER adapter_driver_claims_follow_rules BEFORE INSERT ON adapter_driver_claims
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a driver claim takes the next generation of its start (R11.2)')
   WHERE NEW.kind = 'claim'
     AND NEW.generation IS NOT (SELECT coalesce(max(c.generation), 0) + 1 FROM adapter_driver_claims c WHERE c.start_id = NEW.start_id AND c.kind = 'claim');
  SELECT RAISE(ABORT, 'illegal history refused: a driver claim while the generation before it still holds (R11.2)')
   WHERE NEW.kind = 'claim'
     AND EXISTS (SELECT 1 FROM adapter_driver_claims c
                  WHERE c.start_id = NEW.start_id AND c.generation = NEW.generation - 1 AND c.kind = 'claim'
                    AND NEW.at_ms < min(c.lease_until_ms, coalesce((SELECT r.at_ms FROM adapter_driver_claims r
                                                                   WHERE r.start_id = c.start_id AND r.generation = c.generation AND r.kind = 'release'), c.lease_until_ms)));
  SELECT RAISE(ABORT, 'illegal history refused: a driver claim leases from its time, for at most 25 hours (R11.2)')
   WHERE NEW.kind = 'claim' AND NOT (NEW.lease_until_ms > NEW.at_ms AND NEW.lease_until_ms - NEW.at_ms <= 90000000);
  SELECT RAISE(ABORT, 'illegal history refused: a release ends a generation its own driver claimed, stamped once (R11.2)')
   WHERE NEW.kind = 'release'
     AND (NEW.at_ms IS NOT NEW.lease_until_ms
          OR NOT EXISTS (SELECT 1 FROM adapter_driver_claims c
                          WHERE c.start_id = NEW.start_id AND c.generation = NEW.generation AND c.kind = 'claim'
                            AND c.driver_id = NEW.driver_id AND c.at_ms <= NEW.at_ms));
END;
CREATE TRIGGER adapter_driver_claims_lease_bound BEFORE INSERT ON adapter_driver_claims
WHEN NEW.kind = 'claim'
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a driver claim leases for at most its barrier''s timeout plus 300 s (R12.3)')
   WHERE NEW.lease_until_ms - NEW.at_ms > (SELECT json_extract(e.data_json, '$.barrier.admission.timeoutMs') + 300000
                                             FROM events e WHERE e.event_id = 'barrier:' || NEW.start_id);
  SELECT RAISE(ABORT, 'illegal history refused: a start is claimed at most 32 times (R12.3)')
   WHERE NEW.generation > 32;
END;
CREATE TRIGGER adapter_driver_claims_no_delete BEFORE DELETE ON adapter_driver_claims WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'driver claims are facts: append a new generation instead'); END;

-- ------------------------------------------------------------------------------ keyed evidence
CREATE TRIGGER start_evidence_macs_no_update BEFORE UPDATE ON start_evidence_macs BEGIN SELECT RAISE(ABORT, 'evidence MACs are immutable'); END;
CREATE TRIGGER start_evidence_macs_no_delete BEFORE DELETE ON start_evidence_macs WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'evidence MACs are immutable'); END;
CREATE TRIGGER run_event_macs_no_update BEFORE UPDATE ON run_event_macs BEGIN SELECT RAISE(ABORT, 'event seals are immutable'); END;
CREATE TRIGGER run_event_macs_no_delete BEFORE DELETE ON run_event_macs WHEN NOT EXISTS (SELECT 1 FROM run_compactions c WHERE 'run-' || c.run_id = OLD.stream_id)
BEGIN SELECT RAISE(ABORT, 'event seals are immutable'); END;
CREATE TRIGGER run_event_seal_origins_no_update BEFORE UPDATE ON run_event_seal_origins BEGIN SELECT RAISE(ABORT, 'event seals are immutable'); END;
CREATE TRIGGER run_event_seal_origins_no_delete BEFORE DELETE ON run_event_seal_origins BEGIN SELECT RAISE(ABORT, 'event seals are immutable'); END;

-- --------------------------------------------------------------------------- invocation plans
CREATE TRIGGER invocation_plans_shred_only BEFORE UPDATE ON invocation_plans
  WHEN NOT (OLD.ciphertext IS NOT NULL AND NEW.ciphertext IS NULL AND NEW.key_id IS NULL AND NEW.nonce IS NULL
            AND NEW.start_id = OLD.start_id AND NEW.plan_digest = OLD.plan_digest AND NEW.preview_json = OLD.preview_json)
  BEGIN SELECT RAISE(ABORT, 'an invocation plan can only be shredded'); END;
CREATE TRIGGER invocation_plans_no_delete BEFORE DELETE ON invocation_plans WHEN NOT EXISTS (SELECT 1 FROM compacted_identities i WHERE i.identity = 'startId' AND i.value = OLD.start_id)
BEGIN SELECT RAISE(ABORT, 'an invocation plan is shredded, never deleted'); END;

-- ---------------------------------------------------------------------------------- retention
CREATE TRIGGER run_compactions_by_retention BEFORE INSERT ON run_compactions WHEN ql3_retention_gate() IS NOT 1
BEGIN SELECT RAISE(ABORT, 'a compaction record is written by the retention path only (R14.2)'); END;
CREATE TRIGGER run_compactions_no_update BEFORE UPDATE ON run_compactions BEGIN SELECT RAISE(ABORT, 'compaction records are immutable'); END;
CREATE TRIGGER run_compactions_no_delete BEFORE DELETE ON run_compactions BEGIN SELECT RAISE(ABORT, 'compaction records are immutable'); END;
CREATE TRIGGER compacted_identities_by_retention BEFORE INSERT ON compacted_identities WHEN ql3_retention_gate() IS NOT 1
BEGIN SELECT RAISE(ABORT, 'a compacted identity is written by the retention path only (R14.2)'); END;
CREATE TRIGGER compacted_identities_no_update BEFORE UPDATE ON compacted_identities BEGIN SELECT RAISE(ABORT, 'compacted identities are immutable'); END;
CREATE TRIGGER compacted_identities_no_delete BEFORE DELETE ON compacted_identities BEGIN SELECT RAISE(ABORT, 'compacted identities are immutable'); END;
