import type { PoolClient } from 'pg';
import { canonicalJson, compactionBlockerOf, compactionDigestOf, compactionRecordOf, decodeCompactOptions, streamNameOf, type CompactReport, type ReplayIdentity, type StepRunStatus } from '../../domain';
import { decide, type ClaimRow } from '../../application/driverClaimRules';
import { openPostgresStartBarrier, type PostgresStartBarrier, type PostgresStartBarrierOptions } from './postgresAuthority';
import { barrierIdentitiesSql } from './identities';

// R14.2 on PostgreSQL: the operator's retention path. Its login is a member of ql3_runtime (it
// opens and reads the store as the runtime does) and of ql3_retention, the one role that may
// execute ql3.compact_run, an owner function that
// checks the rule again, writes the record and the identities and deletes the Run's rows; the
// runtime (ql3_runtime) has neither that grant nor DELETE on any ql3 table. Each Run is compacted
// in its own transaction, its Run head locked first: a crash leaves it whole or compacted. The
// space: DELETE leaves dead tuples that VACUUM (autovacuum, or the one `compact` runs on the
// tables it emptied) makes reusable; only VACUUM FULL gives bytes back to the file system.

export interface PostgresCompactReport extends CompactReport {
  /** The ql3 tables' size (pg_total_relation_size, summed) before compaction and after its VACUUM. */
  readonly tableBytes: { readonly before: number; readonly after: number };
}

export interface PostgresRetention {
  compact(options: { readonly before: string | number }): Promise<PostgresCompactReport>;
  /** The store as the retention path opened it (verify, reads). */
  readonly authority: PostgresStartBarrier;
  close(): Promise<void>;
}

/** Where a crash-test hook may stop a compaction: inside a Run's transaction before and after the function, then before the vacuum. */
export const PG_COMPACTION_STEPS = ['record', 'beforeCommit', 'vacuum'] as const;
export type PgCompactionStep = (typeof PG_COMPACTION_STEPS)[number];

/** The tables compaction deletes from: the ones its VACUUM visits. */
const EMPTIED = [
  'start_outcomes', 'adapter_driver_claims', 'start_evidence_macs', 'in_doubt_starts', 'invocation_plans', 'resolution_notes', 'audit_receipts',
  'trace_anchors', 'security_audit_events', 'step_run_mutations', 'tool_execution_start_barriers', 'step_runs', 'runs', 'run_event_macs', 'events', 'streams',
] as const;

const Q = {
  runs: 'SELECT run_id, project_id FROM ql3.runs ORDER BY run_id',
  // the Run's turn, as a lifecycle writer takes it: no write of the Run runs beside the compaction
  turn: 'SELECT ql3.await_run_turn($1, $2) AS found',
  head: 'SELECT project_id FROM ql3.runs WHERE run_id = $1',
  stepRunStatuses: 'SELECT status FROM ql3.step_runs WHERE run_id = $1',
  barriers: `SELECT start_id, step_run_id, started_step_run_version::int8::float8 AS started_step_run_version, command_digest, barrier_digest,
    EXISTS (SELECT 1 FROM ql3.start_outcomes o WHERE o.start_id = b.start_id) AS has_outcome
    FROM ql3.tool_execution_start_barriers b WHERE run_id = $1 ORDER BY start_id`,
  claims: `SELECT start_id, generation::float8 AS generation, kind, driver_id, at_ms::float8 AS at_ms, lease_until_ms::float8 AS lease_until_ms, claim_digest
    FROM ql3.adapter_driver_claims WHERE start_id = ANY ($1::text[]) ORDER BY start_id, generation, kind`,
  events: `SELECT global_position::float8 AS global_position, stream_position::float8 AS stream_position, event_id, event_type, data_json,
    committed_at_ms::float8 AS committed_at_ms, chain_digest FROM ql3.events WHERE stream_id = $1 ORDER BY stream_position`,
  identities: `SELECT k.identity, k.value, b.start_id FROM ql3.tool_execution_start_barriers b CROSS JOIN LATERAL ${barrierIdentitiesSql('b')} WHERE b.start_id = ANY ($1::text[])`,
  streamVersion: 'SELECT version::float8 AS version FROM ql3.streams WHERE stream_id = $1',
  now: 'SELECT (extract(epoch FROM clock_timestamp()) * 1000)::int8::float8 AS now_ms',
  bytes: `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::float8 AS bytes FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'ql3' AND c.relkind = 'r'`,
} as const;

export const openPostgresRetention = async (options: PostgresStartBarrierOptions & { readonly onCompactionStep?: (step: PgCompactionStep) => void }): Promise<PostgresRetention> => {
  const { onCompactionStep, ...open } = options;
  return postgresRetentionOn(await openPostgresStartBarrier(open as PostgresStartBarrierOptions), onCompactionStep);
};

/** The retention path on an authority this process opened: for tools that already hold one. */
export const postgresRetentionOn = (authority: PostgresStartBarrier, onCompactionStep?: (step: PgCompactionStep) => void): PostgresRetention => {
  const step = onCompactionStep ?? (() => undefined);

  const compactRun = async (c: PoolClient, runId: string, beforeMs: number): Promise<CompactReport['compacted'][number] | CompactReport['kept'][number] | undefined> => {
    if ((await c.query<{ found: boolean }>(Q.turn, [runId, authority.timeouts.lockMs])).rows[0]?.found !== true) return undefined; // compacted meanwhile
    const head = (await c.query<{ project_id: string }>(Q.head, [runId])).rows[0]!;
    const stream = streamNameOf(runId);
    const now = (await c.query<{ now_ms: number }>(Q.now)).rows[0]!.now_ms;
    const barriers = (await c.query<{ start_id: string; step_run_id: string; started_step_run_version: number; command_digest: string; barrier_digest: string; has_outcome: boolean }>(Q.barriers, [runId])).rows;
    const starts = barriers.map((b) => b.start_id);
    const claims = (await c.query<ClaimRow>(Q.claims, [starts])).rows;
    const events = (await c.query<{ global_position: number; stream_position: number; event_id: string; event_type: string; data_json: string; committed_at_ms: number; chain_digest: string | null }>(Q.events, [stream])).rows;
    const reason = compactionBlockerOf(
      {
        stepRunStatuses: (await c.query<{ status: StepRunStatus }>(Q.stepRunStatuses, [runId])).rows.map((r) => r.status),
        starts: barriers.length,
        outcomes: barriers.filter((b) => b.has_outcome).length,
        liveClaims: barriers.filter((b) => decide(claims.filter((r) => r.start_id === b.start_id), now).holder !== undefined).length,
        finishedAtMs: Math.max(...events.map((e) => e.committed_at_ms)),
      },
      beforeMs,
    );
    if (reason !== undefined) return { runId, reason };
    const identities = (await c.query<{ identity: ReplayIdentity; value: string; start_id: string }>(Q.identities, [starts])).rows;
    const streamVersion = (await c.query<{ version: number }>(Q.streamVersion, [stream])).rows[0]?.version ?? 0;
    const record = compactionRecordOf({ runId, projectId: head.project_id, streamVersion, events, barriers, identities, beforeMs, compactedAtMs: now });
    const digest = compactionDigestOf(record);
    step('record');
    await c.query('SELECT ql3.compact_run($1, $2)', [canonicalJson(record), digest]);
    step('beforeCommit');
    return { runId, compactionDigest: digest, starts: barriers.length, events: events.length };
  };

  const bytes = async () => (await authority.pool.query<{ bytes: number }>(Q.bytes)).rows[0]!.bytes;

  return {
    authority,
    compact: async (input) => {
      const { beforeMs } = decodeCompactOptions(input);
      const before = await bytes();
      const compacted: CompactReport['compacted'][number][] = [];
      const kept: CompactReport['kept'][number][] = [];
      for (const { run_id } of (await authority.pool.query<{ run_id: string }>(Q.runs)).rows) {
        const c = await authority.pool.connect();
        try {
          await c.query('BEGIN ISOLATION LEVEL READ COMMITTED');
          const done = await compactRun(c, run_id, beforeMs);
          await c.query('COMMIT');
          if (done === undefined) continue;
          if ('reason' in done) kept.push(done);
          else compacted.push(done);
        } catch (e) {
          await c.query('ROLLBACK').catch(() => undefined);
          throw e;
        } finally {
          c.release();
        }
      }
      if (compacted.length > 0) {
        step('vacuum');
        // the retention login may not own the tables: VACUUM then skips them with a warning, and autovacuum does it later
        await authority.pool.query(`VACUUM (ANALYZE) ${EMPTIED.map((t) => `ql3.${t}`).join(', ')}`);
      }
      return { beforeMs, compacted, kept, tableBytes: { before, after: await bytes() } };
    },
    close: () => authority.close(),
  };
};
