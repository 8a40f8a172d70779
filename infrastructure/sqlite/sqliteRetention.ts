import { statSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { canonicalJson, compactionBlockerOf, compactionDigestOf, compactionRecordOf, decodeCompactOptions, streamNameOf, type CompactReport, type ReplayIdentity, type StepRunStatus } from '../../domain';
import { decide, type ClaimRow } from '../../application/driverClaimRules';
import { openSqliteStartBarrier } from './sqliteAuthority';
import { barrierIdentitiesSql } from './identities';
import type { SqliteStartBarrier, SqliteStartBarrierOptions } from './sqliteAuthority';

// R14.2 on SQLite: the operator's retention path. It opens the store as the runtime does (the
// migrations, the schema check), then registers ql3_retention_gate() on its own connection: the
// one function the delete guards and the compaction tables' insert guards call. The
// runtime's connection never registers it, so there its deletes and forged records do not even
// prepare. Each Run is compacted in its own BEGIN IMMEDIATE: a crash leaves it whole or
// compacted. The file shrinks afterwards: the first compaction turns auto_vacuum to INCREMENTAL
// (a VACUUM, once), later ones run incremental_vacuum; a TRUNCATE checkpoint empties the WAL.

export interface SqliteCompactReport extends CompactReport {
  /** The database file's size (WAL included) before and after compaction and vacuum. */
  readonly fileBytes: { readonly before: number; readonly after: number };
}

export interface SqliteRetention {
  compact(options: { readonly before: string | number }): Promise<SqliteCompactReport>;
  /** The store as the retention path opened it (verify, reads). */
  readonly authority: SqliteStartBarrier;
  close(): Promise<void>;
}

const Q = {
  runs: 'SELECT run_id, project_id FROM runs ORDER BY run_id',
  stepRunStatuses: 'SELECT status FROM step_runs WHERE run_id = ?',
  barriers: `SELECT start_id, step_run_id, started_step_run_version, command_digest, barrier_digest, audit_event_id, trace_id, audit_receipt_id,
    EXISTS (SELECT 1 FROM start_outcomes o WHERE o.start_id = b.start_id) AS has_outcome
    FROM tool_execution_start_barriers b WHERE run_id = ? ORDER BY start_id`,
  claims: 'SELECT * FROM adapter_driver_claims WHERE start_id IN (SELECT value FROM json_each(?)) ORDER BY start_id, generation, kind',
  events: 'SELECT global_position, stream_position, event_id, event_type, data_json, committed_at_ms, chain_digest FROM events WHERE stream_id = ? ORDER BY stream_position',
  // every identity each barrier holds (the facts' keys it names), as the compaction record binds them
  identities: `SELECT identity, value, start_id FROM (${barrierIdentitiesSql()}) WHERE start_id IN (SELECT value FROM json_each(?))`,
  streamVersion: 'SELECT version FROM streams WHERE stream_id = ?',
  now: "SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now_ms",
} as const;

const STARTS = '(SELECT value FROM json_each(@starts))';
/** Children before parents, as the foreign keys need. */
/** The tables whose key (or an index) leads with the start id, children before parents. */
const BY_START = [
  'start_whole_at_commit', 'start_outcomes', 'adapter_driver_claims', 'start_evidence_macs', 'in_doubt_starts', 'invocation_plans',
  'resolution_notes', 'tool_execution_start_barriers',
] as const;
/** The fact tables, by their own keys (their start_id column has no index). */
const BY_KEY = [
  ['audit_receipts', 'audit_receipt_id', 'receipts'],
  ['trace_anchors', 'trace_id', 'traces'],
  ['security_audit_events', 'audit_event_id', 'audits'],
] as const;
const DELETES = [
  ...BY_START.map((table) => `DELETE FROM ${table} WHERE start_id IN ${STARTS}`),
  ...BY_KEY.map(([table, key, list]) => `DELETE FROM ${table} WHERE ${key} IN (SELECT value FROM json_each(@${list}))`),
  `DELETE FROM step_run_mutations WHERE start_id IN ${STARTS}`,
  'DELETE FROM step_runs WHERE run_id = @run',
  'DELETE FROM runs WHERE run_id = @run',
  'DELETE FROM events WHERE stream_id = @stream',
  'DELETE FROM run_event_macs WHERE stream_id = @stream',
  'DELETE FROM streams WHERE stream_id = @stream',
];

const fileBytes = (path: string): number => [path, `${path}-wal`].reduce((n, p) => n + (statSync(p, { throwIfNoEntry: false })?.size ?? 0), 0);

/** Where a crash-test hook may stop a compaction: inside a Run's transaction after each step, then before the vacuum. */
export const COMPACTION_STEPS = ['record', ...DELETES.map((sql) => `delete:${sql.split(' ')[2]}`), 'beforeCommit', 'vacuum'] as const;
export type CompactionStep = (typeof COMPACTION_STEPS)[number];

export const openSqliteRetention = async (options: SqliteStartBarrierOptions & { readonly onCompactionStep?: (step: CompactionStep) => void }): Promise<SqliteRetention> => {
  const { onCompactionStep, ...open } = options;
  return retentionOn(await openSqliteStartBarrier(open), onCompactionStep);
};

/** The retention path on an authority this process opened (its connection gets the gate): for tools that already hold one. */
export const retentionOn = (authority: SqliteStartBarrier, onCompactionStep?: (step: CompactionStep) => void): SqliteRetention => {
  const db = authority.db as Database.Database;
  db.function('ql3_retention_gate', { deterministic: false }, () => 1);
  // a trigger may call an application function only on a connection that trusts its schema: this one
  db.pragma('trusted_schema = ON');
  const q = Object.fromEntries(Object.entries(Q).map(([k, sql]) => [k, db.prepare(sql)])) as { [K in keyof typeof Q]: Database.Statement };
  const deletes = DELETES.map((sql) => [sql, db.prepare(sql)] as const);
  const insertRecord = db.prepare('INSERT INTO run_compactions (run_id, record_json, compaction_digest) VALUES (?, ?, ?)');
  const insertIdentity = db.prepare('INSERT INTO compacted_identities (identity, value, start_id, run_id, command_digest, barrier_digest) VALUES (?, ?, ?, ?, ?, ?)');
  const step = onCompactionStep ?? (() => undefined);

  const compactRun = (runId: string, projectId: string, beforeMs: number): CompactReport['compacted'][number] | CompactReport['kept'][number] => {
    const stream = streamNameOf(runId);
    const now = (q.now.get() as { now_ms: number }).now_ms;
    const barriers = q.barriers.all(runId) as {
      start_id: string; step_run_id: string; started_step_run_version: number; command_digest: string; barrier_digest: string; audit_event_id: string; trace_id: string; audit_receipt_id: string; has_outcome: number;
    }[];
    const starts = JSON.stringify(barriers.map((b) => b.start_id));
    const claims = q.claims.all(starts) as ClaimRow[];
    const events = q.events.all(stream) as { global_position: number; stream_position: number; event_id: string; event_type: string; data_json: string; committed_at_ms: number; chain_digest: string | null }[];
    const reason = compactionBlockerOf(
      {
        stepRunStatuses: (q.stepRunStatuses.all(runId) as { status: StepRunStatus }[]).map((r) => r.status),
        starts: barriers.length,
        outcomes: barriers.filter((b) => b.has_outcome === 1).length,
        liveClaims: barriers.filter((b) => decide(claims.filter((c) => c.start_id === b.start_id), now).holder !== undefined).length,
        finishedAtMs: Math.max(...events.map((e) => e.committed_at_ms)),
      },
      beforeMs,
    );
    if (reason !== undefined) return { runId, reason };
    const identities = q.identities.all(starts) as { identity: ReplayIdentity; value: string; start_id: string }[];
    const streamVersion = (q.streamVersion.get(stream) as { version: number } | undefined)?.version ?? 0;
    const record = compactionRecordOf({ runId, projectId, streamVersion, events, barriers, identities, beforeMs, compactedAtMs: now });
    const digest = compactionDigestOf(record);
    insertRecord.run(runId, canonicalJson(record), digest);
    const byStart = new Map(barriers.map((b) => [b.start_id, b]));
    for (const i of identities) insertIdentity.run(i.identity, i.value, i.start_id, runId, byStart.get(i.start_id)!.command_digest, byStart.get(i.start_id)!.barrier_digest);
    step('record');
    const list = (column: 'audit_receipt_id' | 'trace_id' | 'audit_event_id') => JSON.stringify(barriers.map((b) => b[column]));
    const keys = { receipts: list('audit_receipt_id'), traces: list('trace_id'), audits: list('audit_event_id') };
    for (const [sql, statement] of deletes) {
      statement.run({ starts, run: runId, stream, ...keys });
      step(`delete:${sql.split(' ')[2]}` as CompactionStep);
    }
    step('beforeCommit');
    return { runId, compactionDigest: digest, starts: barriers.length, events: events.length };
  };

  return {
    authority,
    compact: async (input) => {
      const { beforeMs } = decodeCompactOptions(input);
      const before = fileBytes(db.name);
      const compacted: CompactReport['compacted'][number][] = [];
      const kept: CompactReport['kept'][number][] = [];
      // Children go before parents in each Run's transaction; with foreign keys on, SQLite would
      // also scan every child table whose reference has no index for each parent row deleted
      // (O(store) per Run). verify's foreign_key_check covers what compaction leaves.
      const foreignKeys = db.pragma('foreign_keys', { simple: true });
      db.pragma('foreign_keys = OFF');
      try {
        for (const { run_id, project_id } of q.runs.all() as { run_id: string; project_id: string }[]) {
          const done = db.transaction(() => compactRun(run_id, project_id, beforeMs)).immediate();
          if ('reason' in done) kept.push(done);
          else compacted.push(done);
        }
      } finally {
        db.pragma(`foreign_keys = ${foreignKeys === 1 ? 'ON' : 'OFF'}`);
      }
      if (compacted.length > 0) {
        step('vacuum');
        if (db.pragma('auto_vacuum', { simple: true }) !== 2) {
          db.pragma('auto_vacuum = INCREMENTAL');
          db.exec('VACUUM');
        } else {
          db.pragma('incremental_vacuum');
        }
        db.pragma('wal_checkpoint(TRUNCATE)');
      }
      return { beforeMs, compacted, kept, fileBytes: { before, after: fileBytes(db.name) } };
    },
    close: () => authority.close(),
  };
};
