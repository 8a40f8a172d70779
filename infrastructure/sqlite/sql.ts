// SQL owned by the SQLite backend. Every value is a bound parameter.
import { commandDigestOfStartSql, identitiesOfStartSql, indexNamesStartSql, lookupReplaySql } from './identities';
import { STEP_RUN_EVENT_TYPES_SQL } from '../../domain/stepRunMoves';

export const PRAGMAS = (synchronous: 'FULL' | 'NORMAL', busyTimeoutMs: number): string[] => [
  'journal_mode = WAL',
  `synchronous = ${synchronous}`,
  'foreign_keys = ON',
  `busy_timeout = ${Math.trunc(busyTimeoutMs)}`,
  'trusted_schema = OFF',
];

export const MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS schema_migrations (
  name          TEXT    NOT NULL PRIMARY KEY,
  checksum      TEXT    NOT NULL,
  applied_at_ms INTEGER NOT NULL
) STRICT`;
/** Every object of the file but SQLite's own (sqlite_autoindex_*, sqlite_stat*, sqlite_sequence). */
export const SCHEMA_OBJECTS = "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'";
export const SELECT_APPLIED = 'SELECT name, checksum FROM schema_migrations ORDER BY name';
export const INSERT_APPLIED = 'INSERT INTO schema_migrations (name, checksum, applied_at_ms) VALUES (?, ?, ?)';
/** R9.2: each ledger row binds when it was applied; the migrator fills what it inserted. */
export const LEDGER_DIGEST_PRESENT = "SELECT 1 FROM pragma_table_info('schema_migrations') WHERE name = 'ledger_digest'";
export const FILL_LEDGER_DIGESTS = 'UPDATE schema_migrations SET ledger_digest = ql3_fields_digest(?, name, checksum, applied_at_ms) WHERE ledger_digest IS NULL';
/** The capability rows, checked by an open and by verify against what the migrations set. */
export const SELECT_CAPABILITIES = 'SELECT name, version FROM capabilities ORDER BY name';
export const SELECT_LEDGER = 'SELECT name, checksum, applied_at_ms, ledger_digest FROM schema_migrations ORDER BY name';

/** R14.2: the identities of compacted starts (they still refuse reuse), with their record's digest. */
export const LOOKUP_COMPACTED = `SELECT i.identity, i.value, i.start_id, i.run_id, i.command_digest, i.barrier_digest, c.compaction_digest
  FROM compacted_identities i LEFT JOIN run_compactions c ON c.run_id = i.run_id
  WHERE (i.identity, i.value) IN (SELECT json_extract(p.value, '$[0]'), json_extract(p.value, '$[1]') FROM json_each(?) p)`;
export const SELECT_RUN_COMPACTED = 'SELECT 1 AS compacted FROM run_compactions WHERE run_id = ?';
/** SQLite's own clock (R3.10), read once per transaction. */
export const NOW_MS = "SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now_ms";

/**
 * R3.1: the identities' key probes (identities.ts) and, in the same statement, the identities of
 * compacted starts (LOOKUP_COMPACTED's rows, the probe pairs as JSON bound last). A live row has
 * no run_id; a compacted row carries its record's digests.
 */
export const LOOKUP_REPLAY = `SELECT identity, value, start_id, NULL AS run_id, NULL AS command_digest, NULL AS barrier_digest, NULL AS compaction_digest
  FROM (${lookupReplaySql()})
  UNION ALL ${LOOKUP_COMPACTED}`;
/** The same probes of a barrier's own values: a barrier read sees a fact missing or naming another start. */
export const IDENTITIES_OF_START = identitiesOfStartSql();
/** The command digest of the barrier a probe row names. */
export const SELECT_COMMAND_DIGEST = commandDigestOfStartSql();

export const SELECT_RUN_HEAD = `SELECT r.run_id, r.project_id, r.snapshot_id, r.snapshot_digest, r.version, s.version AS stream_version
  FROM runs r LEFT JOIN streams s ON s.stream_id = ? WHERE r.run_id = ?`;
/**
 * A start's reads under its lock in one statement: the Run head (SELECT_RUN_HEAD's columns), its
 * StepRun row (SELECT_STEP_RUN's, as sr_*), the chain link its first event binds (the event at
 * the head) and the transaction's clock (R3.10). Parameters: stream id, step run id, run id.
 */
export const SELECT_START_HEAD = `SELECT r.run_id, r.project_id, r.snapshot_id, r.snapshot_digest, r.version, s.version AS stream_version,
  sr.run_id AS sr_run_id, sr.step_run_id AS sr_step_run_id, sr.project_id AS sr_project_id, sr.kind AS sr_kind, sr.status AS sr_status,
  sr.version AS sr_version, sr.digest AS sr_digest, sr.state_json AS sr_state_json,
  (SELECT e.chain_digest FROM events e WHERE e.stream_id = s.stream_id AND e.stream_position = r.version) AS chain_digest,
  CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now_ms
  FROM runs r LEFT JOIN streams s ON s.stream_id = ? LEFT JOIN step_runs sr ON sr.run_id = r.run_id AND sr.step_run_id = ?
  WHERE r.run_id = ?`;
export const SELECT_STREAM_VERSION = 'SELECT version FROM streams WHERE stream_id = ?';
export const SELECT_STEP_RUN = 'SELECT * FROM step_runs WHERE run_id = ? AND step_run_id = ?';
/** What a stream read checks its log against (agreedStreamVersion): both heads, any StepRun head, where the log ends. */
export const SELECT_STREAM_HEADS = `SELECT (SELECT version FROM streams WHERE stream_id = @stream) AS stream, (SELECT version FROM runs WHERE run_id = @run) AS run,
  (SELECT coalesce(sum(version), 0) FROM step_runs WHERE run_id = @run) AS step_run_events,
  (SELECT count(*) FROM tool_execution_start_barriers WHERE run_id = @run) AS starts, (SELECT max(stream_position) FROM events WHERE stream_id = @stream) AS log_end`;

export const INSERT_STREAM = 'INSERT INTO streams (stream_id, stream_type, version) VALUES (?, ?, ?)';
export const CAS_STREAM = 'UPDATE streams SET version = ? WHERE stream_id = ? AND version = ?';
export const INSERT_EVENT = `INSERT INTO events (stream_id, stream_position, event_id, event_type, data_json, committed_at_ms, chain_digest)
  VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING global_position`;
/** INSERT_EVENT for a start's events, whose global positions nobody reads: RETURNING costs a temporary table per row. */
export const APPEND_EVENT = `INSERT INTO events (stream_id, stream_position, event_id, event_type, data_json, committed_at_ms, chain_digest)
  VALUES (?, ?, ?, ?, ?, ?, ?)`;
/** The link the next event of a stream binds (R9.2). */
export const SELECT_CHAIN_DIGEST = 'SELECT chain_digest FROM events WHERE stream_id = ? AND stream_position = ?';
export const SELECT_STREAM_EVENTS = `SELECT global_position, stream_id, stream_position, event_id, event_type, data_json, committed_at_ms, chain_digest
  FROM events WHERE stream_id = ? AND stream_position >= ? AND stream_position <= ? ORDER BY stream_position`;

export const INSERT_RUN = `INSERT INTO runs (run_id, project_id, snapshot_id, snapshot_digest, version)
  VALUES (@run_id, @project_id, @snapshot_id, @snapshot_digest, @version)`;
export const CAS_RUN = 'UPDATE runs SET version = ? WHERE run_id = ? AND version = ?';
export const UPSERT_STEP_RUN = `INSERT INTO step_runs (run_id, step_run_id, project_id, kind, status, version, digest, state_json)
  VALUES (@run_id, @step_run_id, @project_id, @kind, @status, @version, @digest, @state_json)
  ON CONFLICT (run_id, step_run_id) DO UPDATE SET status = excluded.status, version = excluded.version,
    digest = excluded.digest, state_json = excluded.state_json
  WHERE step_runs.version = excluded.version - 1`;
/** R3.4: compare-and-set on status, version and digest together. */
export const CAS_STEP_RUN = `UPDATE step_runs SET status = @status, version = @version, digest = @digest, state_json = @state_json
  WHERE run_id = @run_id AND step_run_id = @step_run_id AND version = @expected_version AND status = @expected_status AND digest = @expected_digest`;

export const INSERT_AUDIT = `INSERT INTO security_audit_events (audit_event_id, start_id, run_id, step_run_id, audit_event_digest, committed_at_ms)
  VALUES (@audit_event_id, @start_id, @run_id, @step_run_id, @audit_event_digest, @committed_at_ms)`;
export const INSERT_TRACE = `INSERT INTO trace_anchors (trace_id, span_id, start_id, run_id, step_run_id, trace_digest, committed_at_ms)
  VALUES (@trace_id, @span_id, @start_id, @run_id, @step_run_id, @trace_digest, @committed_at_ms)`;
export const INSERT_RECEIPT = `INSERT INTO audit_receipts (audit_receipt_id, audit_event_id, trace_id, start_id, receipt_digest, committed_at_ms)
  VALUES (@audit_receipt_id, @audit_event_id, @trace_id, @start_id, @receipt_digest, @committed_at_ms)`;
export const INSERT_MUTATION = `INSERT INTO step_run_mutations (mutation_id, run_event_id, start_id, run_id, step_run_id, from_status, to_status,
    from_version, to_version, run_event_sequence, mutation_digest, started_step_run_digest, requested_at_ms, committed_at_ms)
  VALUES (@mutation_id, @run_event_id, @start_id, @run_id, @step_run_id, @from_status, @to_status,
    @from_version, @to_version, @run_event_sequence, @mutation_digest, @started_step_run_digest, @requested_at_ms, @committed_at_ms)`;
export const INSERT_BARRIER = `INSERT INTO tool_execution_start_barriers (start_id, command_digest, barrier_digest, project_id, run_id,
    step_run_id, started_step_run_version, started_step_run_digest, mutation_id, mutation_digest, run_event_id, trace_id, trace_digest,
    audit_event_id, audit_receipt_id, audit_receipt_digest, adapter_id, committed_at_ms)
  VALUES (@start_id, @command_digest, @barrier_digest, @project_id, @run_id,
    @step_run_id, @started_step_run_version, @started_step_run_digest, @mutation_id, @mutation_digest, @run_event_id, @trace_id, @trace_digest,
    @audit_event_id, @audit_receipt_id, @audit_receipt_digest, @adapter_id, @committed_at_ms)`;

/** A barrier and the four fact rows it names, in one row (each by its primary key); a missing fact comes back as NULLs. */
export const SELECT_BARRIER_WITH_FACTS = `SELECT b.*, a.*, t.*, r.*, m.* FROM tool_execution_start_barriers b
  LEFT JOIN security_audit_events a ON a.audit_event_id = b.audit_event_id
  LEFT JOIN trace_anchors t ON t.trace_id = b.trace_id
  LEFT JOIN audit_receipts r ON r.audit_receipt_id = b.audit_receipt_id
  LEFT JOIN step_run_mutations m ON m.mutation_id = b.mutation_id
  WHERE b.start_id = ?`;
/**
 * The five events of a start, around the RunEvent its barrier names (R5.3): their data is the
 * one stored copy of each record's JSON, proven against the barrier's mirror columns.
 */
export const SELECT_START_EVENTS = `SELECT e.stream_id, e.stream_position, e.event_id, e.event_type, e.data_json, e.committed_at_ms
  FROM events a JOIN events e ON e.stream_id = a.stream_id AND e.stream_position BETWEEN a.stream_position - 3 AND a.stream_position + 1
  WHERE a.event_id = ? AND a.stream_id = ? ORDER BY e.stream_position`;
/** An attempt's start: the barrier's unique attempt key. */
export const SELECT_ATTEMPT = 'SELECT start_id FROM tool_execution_start_barriers WHERE run_id = ? AND step_run_id = ? AND started_step_run_version = ?';
/** Whether rows still claim a start whose barrier row is missing. */
export const SELECT_INDEX_NAMES_START = indexNamesStartSql();

/** The events of one type in one Run stream, in order: the log's own record of every attempt (StepRunStarted) or StepRun (StepRunCreated). */
export const SELECT_STREAM_EVENTS_OF_TYPE = `SELECT stream_id, stream_position, event_id, event_type, data_json, committed_at_ms FROM events
  WHERE stream_id = ? AND event_type = ? ORDER BY stream_position`;

/** A StepRun's last event in its Run's log: one seek in the StepRun version index. */
export const SELECT_LAST_STEP_RUN_EVENT = `SELECT stream_id, stream_position, event_id, event_type, data_json, committed_at_ms FROM events
  WHERE stream_id = ? AND event_type IN ${STEP_RUN_EVENT_TYPES_SQL}
    AND json_extract(data_json, '$.stepRunId') = ?
  ORDER BY json_extract(data_json, '$.stepRunVersion') DESC LIMIT 1`;

/** The Run's RunCreated, then one StepRun's events in version order: what that StepRun's head must fold to (R9.3). */
export const SELECT_STEP_RUN_LOG = `SELECT stream_id, stream_position, event_id, event_type, data_json, committed_at_ms FROM events
  WHERE stream_id = ? AND stream_position = 1
  UNION ALL SELECT * FROM (SELECT stream_id, stream_position, event_id, event_type, data_json, committed_at_ms FROM events
  WHERE stream_id = ? AND event_type IN ${STEP_RUN_EVENT_TYPES_SQL}
    AND json_extract(data_json, '$.stepRunId') = ?
  ORDER BY json_extract(data_json, '$.stepRunVersion'))`;

/** Keyed evidence (R9.4): the MAC row of one barrier, written and read only with a keyring. */
export const INSERT_EVIDENCE_MAC = 'INSERT INTO start_evidence_macs (start_id, key_id, mac) VALUES (?, ?, ?)';
export const SELECT_EVIDENCE_MACS = 'SELECT key_id, mac FROM start_evidence_macs WHERE start_id = ?';

/** Keyed evidence over the Run stream (R9.4, application/eventSeals.ts): written and read only with a keyring. */
export const INSERT_EVENT_MAC = `INSERT INTO run_event_macs (stream_id, from_position, to_position, key_id, mac)
  VALUES (@stream_id, @from_position, @to_position, @key_id, @mac)`;
/** Every seal that overlaps positions from..to of one stream (a forged extra one included). */
export const SELECT_EVENT_MACS_OVER = `SELECT stream_id, from_position, to_position, key_id, mac FROM run_event_macs
  WHERE stream_id = ? AND from_position <= ? AND to_position >= ? ORDER BY from_position`;
/** A row when any keyed evidence is stored (read only when no seal origin is). */
export const KEYED_EVIDENCE_STORED = 'SELECT 1 FROM run_event_macs UNION ALL SELECT 1 FROM start_evidence_macs LIMIT 1';
export const SELECT_SEAL_ORIGINS = 'SELECT key_id, from_global_position, from_ms, legacy_gaps, mac FROM run_event_seal_origins ORDER BY key_id';
export const INSERT_SEAL_ORIGIN = `INSERT INTO run_event_seal_origins (key_id, from_global_position, from_ms, legacy_gaps, mac)
  VALUES (@key_id, @from_global_position, @from_ms, @legacy_gaps, @mac) ON CONFLICT DO NOTHING`;
/** R14.1: the ranges of positions below a fresh origin (@origin) that hold no event, read in the keying transaction. */
export const FREE_POSITIONS_BELOW = `WITH taken (p) AS (SELECT global_position FROM events WHERE global_position < @origin UNION ALL SELECT @origin),
  step AS (SELECT p, lag(p, 1, 0) OVER (ORDER BY p) AS prev FROM taken)
SELECT prev + 1 AS from_position, p - 1 AS to_position FROM step WHERE p > prev + 1 ORDER BY p`;
export const NEXT_GLOBAL_POSITION = 'SELECT coalesce(max(global_position), 0) + 1 AS next FROM events';
/** R9.4: where a fresh seal origin starts: the first of the events being sealed when they are already in the log, else the next position. */
export const SEAL_ORIGIN_POSITION = `SELECT coalesce((SELECT global_position FROM events WHERE stream_id = ? AND stream_position = ?),
  (SELECT coalesce(max(global_position), 0) + 1 FROM events)) AS next`;
