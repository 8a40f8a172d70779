import * as t from 'io-ts';
import { compactionProblemsOn } from './compactionVerify';
import type { Pool, PoolClient } from 'pg';
import { START_OUTCOME_KINDS, type ReplayIdentity } from '../../domain';
import { oneOf } from '../../domain/codecs';
import type { StartOutcomeRow } from '../../projections/outcomeRows';
import type { BarriersApi, RunsApi } from '../../application/authority';
import type { VerifyProblem } from '../../domain/records';
import { evidenceProblemOf, type RecoveryView } from '../../application/recoveryRules';
import { claimHistoryProblems, type StoredClaimRow } from '../../application/driverClaimRules';
import { schemaProblems } from '../migrations';
import { readSchemaObjects, schemaObjectProblems } from './schemaObjects';
import { readLedger } from './migrate';
import { eventsOfType, runHeadsOf } from './reads';
import { IDENTITY_STORAGE, identityStartIdsSql } from './identities';
import { readSealedSpan } from './postgresSeals';
import { bind, named, type NamedSql, type Params } from './named';
import { EventRowCodec, PgInt, RunRowCodec, StepRunRowCodec, decodeRow } from './rowCodecs';
import type { PostgresTimeouts } from './transactions';

/** What the recovery view needs of its authority: the pool, its timeouts, its verified reads and lifecycle (named here, so postgresAuthority.ts is not imported back). */
export type RecoveryHost = { readonly pool: Pool; readonly timeouts: PostgresTimeouts; readonly barriers: BarriersApi; readonly runs: RunsApi };

// The PostgreSQL side of the recovery read models. The outcome rows are written by the
// projection trigger (a migration) in the transaction that appends the outcome event; this
// module reads them inside a REPEATABLE READ READ ONLY snapshot (postgresRecovery.ts opens it)
// and hands them to the shared rules of `application/recoveryRules.ts`. Barriers are read
// through the authority's own R5.3-verified `getByStartId` (they are immutable, so the read
// needs no shared snapshot).

// ------------------------------------------------------------------ SQL (schema ql3, bound values only)

/**
 * A row in the Project's scope: its own project_id, or its Run's (R9.3: one changed mirror
 * column must not take a start or a StepRun out of its Project's answers).
 */
const inProject = (alias: string) =>
  `(:project_id::text IS NULL OR ${alias}.project_id = :project_id::text OR ${alias}.run_id IN (SELECT r.run_id FROM ql3.runs r WHERE r.project_id = :project_id::text))`;
const IN_DOUBT = named(`SELECT b.start_id FROM ql3.tool_execution_start_barriers b
  WHERE NOT EXISTS (SELECT 1 FROM ql3.start_outcomes o WHERE o.start_id = b.start_id)
    AND ${inProject('b')}
    AND (:run_id::text IS NULL OR b.run_id = :run_id::text)
    AND (:cutoff_ms::bigint IS NULL OR b.committed_at_ms <= :cutoff_ms::bigint)
  ORDER BY b.committed_at_ms, b.start_id
  LIMIT :limit::bigint`);
/**
 * A page of the in-doubt index, one statement per scope so that each reads its own
 * index in listing order and stops at the limit: Project and Run are equalities, the cutoff a
 * bound (the largest bigint when off).
 */
const inDoubtPage = (where: string) =>
  named(`SELECT start_id, project_id, run_id, committed_at_ms FROM ql3.in_doubt_starts
  WHERE ${where}committed_at_ms <= :cutoff_ms::bigint
  ORDER BY committed_at_ms, start_id
  LIMIT :limit::bigint`);
export const IN_DOUBT_PAGE = {
  store: inDoubtPage(''),
  project: inDoubtPage('project_id = :project_id::text AND '),
  run: inDoubtPage('run_id = :run_id::text AND '),
  projectRun: inDoubtPage('run_id = :run_id::text AND project_id = :project_id::text AND '),
} as const;
const IN_DOUBT_INDEX_AFTER = named('SELECT start_id, project_id, run_id, committed_at_ms FROM ql3.in_doubt_starts WHERE start_id > :after ORDER BY start_id LIMIT :limit');
const RESOLVED_RUN_IDS = named(`SELECT DISTINCT b.run_id FROM ql3.tool_execution_start_barriers b JOIN ql3.start_outcomes o ON o.start_id = b.start_id
  WHERE ${inProject('b')}
    AND (:run_id::text IS NULL OR b.run_id = :run_id::text)
    AND (:cutoff_ms::bigint IS NULL OR b.committed_at_ms <= :cutoff_ms::bigint)
  ORDER BY b.run_id`);
const ATTEMPT_START_IDS = named(`SELECT start_id FROM ql3.tool_execution_start_barriers
  WHERE run_id = :run_id AND step_run_id = :step_run_id ORDER BY started_step_run_version, start_id`);
/** Each R4.1 identity, looked up by its own unique key. */
const IDENTITY_START_IDS = Object.fromEntries(
  Object.entries(IDENTITY_STORAGE).map(([identity, storage]) => [identity, named(identityStartIdsSql(storage))]),
) as Record<ReplayIdentity, NamedSql>;
// With the barrier's timeout (its event's admission), the bound of each claim's lease (R12.3).
const CLAIM_ROWS = named(`SELECT c.start_id, c.generation, c.kind, c.driver_id, c.at_ms, c.lease_until_ms, c.claim_digest,
  (SELECT (e.data_json::json -> 'barrier' -> 'admission' ->> 'timeoutMs')::bigint FROM ql3.events e WHERE e.event_id = 'barrier:' || c.start_id) AS barrier_timeout_ms
  FROM ql3.adapter_driver_claims c ORDER BY c.start_id, c.generation, c.kind`);
const OUTCOME_ROWS = named('SELECT * FROM ql3.start_outcomes WHERE start_id = :start_id');
const EVENT_BY_ID = named(`SELECT e.global_position, e.stream_id, e.stream_position, e.event_id, e.event_type, e.data_json, e.committed_at_ms, e.chain_digest,
    (SELECT p.chain_digest FROM ql3.events p WHERE p.stream_id = e.stream_id AND p.stream_position = e.stream_position - 1) AS previous_chain
  FROM ql3.events e WHERE e.event_id = :event_id`);
const STEP_RUN = named('SELECT * FROM ql3.step_runs WHERE run_id = :run_id AND step_run_id = :step_run_id');
const RUNNING_STEP_RUNS = named(`SELECT * FROM ql3.step_runs sr WHERE sr.status = 'running'
    AND ${inProject('sr')}
    AND (:run_id::text IS NULL OR sr.run_id = :run_id::text)
  ORDER BY run_id, step_run_id
  LIMIT :limit::bigint`);
const COUNTS = named(`SELECT (SELECT count(*) FROM ql3.tool_execution_start_barriers) AS barriers, (SELECT count(*) FROM ql3.start_outcomes) AS outcomes,
  (SELECT count(*) FROM ql3.runs) AS runs, (SELECT count(*) FROM ql3.step_runs) AS step_runs, (SELECT count(*) FROM ql3.events) AS events`);
const BARRIER_IDS_AFTER = named('SELECT start_id FROM ql3.tool_execution_start_barriers WHERE start_id > :after ORDER BY start_id LIMIT :limit');
const OUTCOME_ROWS_AFTER = named('SELECT * FROM ql3.start_outcomes WHERE start_id > :after ORDER BY start_id LIMIT :limit');
const RUN_ROWS_AFTER = named(`SELECT r.run_id, r.project_id, r.snapshot_id, r.snapshot_digest, r.version, s.version AS stream_version
  FROM ql3.runs r LEFT JOIN ql3.streams s ON s.stream_id = 'run-' || r.run_id WHERE r.run_id > :after ORDER BY r.run_id LIMIT :limit`);
const STEP_RUN_ROWS_AFTER = named(`SELECT * FROM ql3.step_runs WHERE (run_id, step_run_id) > (:after_run, :after_step)
  ORDER BY run_id, step_run_id LIMIT :limit`);
const EVENT_ROWS_BY_STREAM_AFTER = named(`SELECT global_position, stream_id, stream_position, event_id, event_type, data_json, committed_at_ms, chain_digest
  FROM ql3.events WHERE (stream_id, stream_position) > (:after_stream, :after_position) ORDER BY stream_id, stream_position LIMIT :limit`);
const RUN_ROW = named(`SELECT r.run_id, r.project_id, r.snapshot_id, r.snapshot_digest, r.version, s.version AS stream_version
  FROM ql3.runs r LEFT JOIN ql3.streams s ON s.stream_id = 'run-' || r.run_id WHERE r.run_id = :run_id`);
const STEP_RUN_ROWS_OF_RUN = named('SELECT * FROM ql3.step_runs WHERE run_id = :run_id ORDER BY step_run_id');
/** Within each stream the global order follows the stream positions (verify folds in stream order). */
const GLOBAL_ORDER_AGAINST_STREAMS = named(`SELECT stream_id, stream_position, global_position FROM (
    SELECT stream_id, stream_position, global_position, lag(global_position) OVER (PARTITION BY stream_id ORDER BY stream_position) AS previous FROM ql3.events) x
  WHERE previous >= global_position LIMIT 20`);

/** Every foreign key of schema ql3, from the catalog, so `verify` checks all of them (the twin of PRAGMA foreign_key_check). */
const FOREIGN_KEYS = named(`SELECT c.conname, cl.relname AS child, pcl.relname AS parent,
    (SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(c.conkey) WITH ORDINALITY AS k (attnum, ord)
       JOIN pg_catalog.pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum) AS child_columns,
    (SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(c.confkey) WITH ORDINALITY AS k (attnum, ord)
       JOIN pg_catalog.pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum) AS parent_columns
  FROM pg_catalog.pg_constraint c
  JOIN pg_catalog.pg_class cl ON cl.oid = c.conrelid
  JOIN pg_catalog.pg_class pcl ON pcl.oid = c.confrelid
  JOIN pg_catalog.pg_namespace n ON n.oid = cl.relnamespace
  WHERE c.contype = 'f' AND n.nspname = :schema
  ORDER BY c.conname`);
const quoteIdent = (name: string): string => `"${name.replace(/"/g, '""')}"`;
/** An anti-join for one catalog foreign key; identifiers come from the catalog, quoted, never values. */
const orphansOf = (fk: { child: string; parent: string; child_columns: string[]; parent_columns: string[] }): NamedSql => {
  const pairs = fk.child_columns.map((c, i) => [quoteIdent(c), quoteIdent(fk.parent_columns[i]!)] as const);
  return named(`SELECT c.ctid::text AS row_id FROM ql3.${quoteIdent(fk.child)} c
    WHERE ${pairs.map(([c]) => `c.${c} IS NOT NULL`).join(' AND ')}
      AND NOT EXISTS (SELECT 1 FROM ql3.${quoteIdent(fk.parent)} p WHERE ${pairs.map(([c, p]) => `p.${p} = c.${c}`).join(' AND ')})
    LIMIT 100`);
};
const DUPLICATE_ATTEMPTS = named(`SELECT run_id, step_run_id, started_step_run_version, count(*) AS n, string_agg(start_id, ', ' ORDER BY start_id) AS starts
  FROM ql3.tool_execution_start_barriers GROUP BY run_id, step_run_id, started_step_run_version HAVING count(*) > 1`);
const evidence = (table: string, id: string) => `SELECT '${table}' AS table_name, e.${id} AS record_id, e.start_id AS start_id,
    EXISTS (SELECT 1 FROM ql3.step_run_mutations m WHERE m.start_id = e.start_id) AS has_move,
    EXISTS (SELECT 1 FROM ql3.tool_execution_start_barriers b WHERE b.start_id = e.start_id AND b.${id} = e.${id}) AS has_barrier
  FROM ql3.${table} e`;
const EVIDENCE_WITHOUT_MOVE = named(`SELECT * FROM (${[
  evidence('security_audit_events', 'audit_event_id'),
  evidence('trace_anchors', 'trace_id'),
  evidence('audit_receipts', 'audit_receipt_id'),
].join(' UNION ALL ')}) x WHERE NOT has_move OR NOT has_barrier`);
const MUTATIONS_WITHOUT_BARRIER = named(`SELECT m.mutation_id, m.start_id FROM ql3.step_run_mutations m
  WHERE NOT EXISTS (SELECT 1 FROM ql3.tool_execution_start_barriers b WHERE b.start_id = m.start_id AND b.mutation_id = m.mutation_id)`);
const STREAM_HEADS = named(`SELECT * FROM (SELECT s.stream_id, s.stream_type, s.version,
    (SELECT count(*) FROM ql3.events e WHERE e.stream_id = s.stream_id) AS n,
    (SELECT max(stream_position) FROM ql3.events e WHERE e.stream_id = s.stream_id) AS top
  FROM ql3.streams s) x WHERE version <> n OR top IS NULL OR version <> top OR stream_type <> 'run'`);

// ------------------------------------------------------------------ row codecs (io-ts at the boundary)

const StartOutcomeRowCodec = t.type({
  start_id: t.string,
  run_id: t.string,
  step_run_id: t.string,
  outcome: oneOf(START_OUTCOME_KINDS),
  decided_by: t.string,
  reason: t.string,
  outcome_digest: t.union([t.string, t.null]),
  step_run_version: PgInt,
  event_id: t.string,
  stream_position: PgInt,
  requested_at_ms: PgInt,
  committed_at_ms: PgInt,
});
const StartIdRow = t.type({ start_id: t.string });
const InDoubtIndexRowCodec = t.type({ start_id: t.string, project_id: t.string, run_id: t.string, committed_at_ms: PgInt });
const CountsRow = t.type({ barriers: PgInt, outcomes: PgInt, runs: PgInt, step_runs: PgInt, events: PgInt });
const RunPageRow = t.intersection([RunRowCodec, t.type({ stream_version: t.union([PgInt, t.null]) })]);
const LoggedEventRowCodec = t.intersection([EventRowCodec, t.type({ chain_digest: t.union([t.string, t.null]) })]);
const LinkedEventRowCodec = t.intersection([LoggedEventRowCodec, t.type({ previous_chain: t.union([t.string, t.null]) })]);
const ForeignKeyRow = t.type({ conname: t.string, child: t.string, parent: t.string, child_columns: t.array(t.string), parent_columns: t.array(t.string) });
const DuplicateAttemptRow = t.type({ run_id: t.string, step_run_id: t.string, started_step_run_version: PgInt, n: PgInt, starts: t.string });
const EvidenceRow = t.type({ table_name: t.string, record_id: t.string, start_id: t.string, has_move: t.boolean, has_barrier: t.boolean });
const MutationOrphanRow = t.type({ mutation_id: t.string, start_id: t.string });
const StreamHeadRow = t.type({ stream_id: t.string, stream_type: t.string, version: PgInt, n: PgInt, top: t.union([PgInt, t.null]) });

export const rowsOf = async <A>(client: PoolClient, sql: NamedSql, params: Params, codec: t.Decoder<unknown, A>, kind: string, id: string): Promise<A[]> =>
  (await client.query(sql.text, bind(sql, params))).rows.map((r: unknown) => decodeRow(codec, r, kind, id));

// ------------------------------------------------------------------ the view

export const createPostgresRecoveryView = (authority: RecoveryHost, client: PoolClient, nowMs: number): RecoveryView => {
  const ids = async (sql: NamedSql, params: Params, where: string) => (await rowsOf(client, sql, params, StartIdRow, 'start barrier', where)).map((r) => r.start_id);
  return {
    nowMs: async () => nowMs,
    sealedSpan: (streamId, from, to) => readSealedSpan(client, streamId, from, to),
    inDoubtStartIds: (f) =>
      ids(IN_DOUBT, { project_id: f.projectId ?? null, run_id: f.runId ?? null, cutoff_ms: f.committedAtOrBeforeMs ?? null, limit: f.limit ?? null }, 'in doubt'),
    resolvedRunIds: async (f) =>
      (await rowsOf(client, RESOLVED_RUN_IDS, { project_id: f.projectId ?? null, run_id: f.runId ?? null, cutoff_ms: f.committedAtOrBeforeMs ?? null }, t.type({ run_id: t.string }), 'start outcome', 'resolved runs')).map((r) => r.run_id),
    attemptStartIds: (runId, stepRunId) => ids(ATTEMPT_START_IDS, { run_id: runId, step_run_id: stepRunId }, `${runId}/${stepRunId}`),
    stepRunStartedRows: (runId) => eventsOfType(client, runId, 'StepRunStarted'),
    stepRunCreatedRows: (runId) => eventsOfType(client, runId, 'StepRunCreated'),
    identityStartIds: (identity, key, attempt) =>
      identity === 'attempt'
        ? ids(IDENTITY_START_IDS.attempt, { identity, key, run_id: attempt?.runId ?? null, step_run_id: attempt?.stepRunId ?? null, version: attempt?.startedStepRunVersion ?? null }, key)
        : ids(IDENTITY_START_IDS[identity], { identity, key }, key),
    readBarrier: (startId) => authority.barriers.getByStartId(startId),
    outcomeRows: (startId) => rowsOf(client, OUTCOME_ROWS, { start_id: startId }, StartOutcomeRowCodec, 'start outcome', startId) as Promise<StartOutcomeRow[]>,
    eventById: async (eventId) => (await rowsOf(client, EVENT_BY_ID, { event_id: eventId }, LinkedEventRowCodec, 'event', eventId))[0],
    stepRunRow: async (runId, stepRunId) => (await rowsOf(client, STEP_RUN, { run_id: runId, step_run_id: stepRunId }, StepRunRowCodec, 'step run', `${runId}/${stepRunId}`))[0],
    runHeads: (runId) => runHeadsOf(client, runId),
    runningStepRuns: (f) => rowsOf(client, RUNNING_STEP_RUNS, { project_id: f.projectId ?? null, run_id: f.runId ?? null, limit: f.limit ?? null }, StepRunRowCodec, 'step run', 'running'),
    inDoubtIndexPage: (f) => {
      const scope = f.runId === undefined ? (f.projectId === undefined ? 'store' : 'project') : f.projectId === undefined ? 'run' : 'projectRun';
      const params = { cutoff_ms: f.committedAtOrBeforeMs ?? Number.MAX_SAFE_INTEGER, limit: f.limit, ...(f.projectId === undefined ? {} : { project_id: f.projectId }), ...(f.runId === undefined ? {} : { run_id: f.runId }) };
      return rowsOf(client, IN_DOUBT_PAGE[scope], params, InDoubtIndexRowCodec, 'in-doubt index', 'page');
    },
    inDoubtIndexRowsAfter: (after, limit) => rowsOf(client, IN_DOUBT_INDEX_AFTER, { after, limit }, InDoubtIndexRowCodec, 'in-doubt index', 'page'),

    counts: async () => {
      const [c] = await rowsOf(client, COUNTS, {}, CountsRow, 'counts', 'ql3');
      if (c === undefined) throw new Error('counts returned no row');
      return { barriers: c.barriers, outcomes: c.outcomes, runs: c.runs, stepRuns: c.step_runs, events: c.events };
    },
    barrierIdsAfter: (after, limit) => ids(BARRIER_IDS_AFTER, { after, limit }, 'page'),
    outcomeRowsAfter: (after, limit) => rowsOf(client, OUTCOME_ROWS_AFTER, { after, limit }, StartOutcomeRowCodec, 'start outcome', 'page') as Promise<StartOutcomeRow[]>,
    runRowsAfter: (after, limit) => rowsOf(client, RUN_ROWS_AFTER, { after, limit }, RunPageRow, 'run', 'page'),
    stepRunRowsAfter: (after, limit) => rowsOf(client, STEP_RUN_ROWS_AFTER, { after_run: after[0], after_step: after[1], limit }, StepRunRowCodec, 'step run', 'page'),
    eventRowsByStreamAfter: (after, limit) =>
      rowsOf(client, EVENT_ROWS_BY_STREAM_AFTER, { after_stream: after[0], after_position: after[1], limit }, LoggedEventRowCodec, 'event', 'page'),
    headsOfRun: async (runId) => ({
      run: (await rowsOf(client, RUN_ROW, { run_id: runId }, RunPageRow, 'run', runId))[0],
      stepRuns: await rowsOf(client, STEP_RUN_ROWS_OF_RUN, { run_id: runId }, StepRunRowCodec, 'step run', runId),
    }),

    integrityProblems: async () => {
      const problems: VerifyProblem[] = [];
      for (const fk of await rowsOf(client, FOREIGN_KEYS, { schema: 'ql3' }, ForeignKeyRow, 'catalog', 'ql3')) {
        const orphans = await rowsOf(client, orphansOf(fk), {}, t.type({ row_id: t.string }), fk.child, fk.conname);
        for (const o of orphans) {
          problems.push({ kind: 'foreign_key', record: `${fk.child} ctid ${o.row_id}`, problem: `references a missing ${fk.parent} row (${fk.conname})` });
        }
      }
      for (const r of await rowsOf(client, DUPLICATE_ATTEMPTS, {}, DuplicateAttemptRow, 'start barrier', 'duplicates')) {
        problems.push({ kind: 'duplicate_attempt', record: `${r.run_id}/${r.step_run_id} v${r.started_step_run_version}`, problem: `${r.n} barriers for one attempt: ${r.starts} (R4.1)` });
      }
      for (const r of await rowsOf(client, EVIDENCE_WITHOUT_MOVE, {}, EvidenceRow, 'evidence', 'orphans')) {
        problems.push(evidenceProblemOf(r));
      }
      for (const r of await rowsOf(client, MUTATIONS_WITHOUT_BARRIER, {}, MutationOrphanRow, 'step run mutation', 'orphans')) {
        problems.push({ kind: 'mutation_without_barrier', record: `step_run_mutations ${r.mutation_id}`, problem: `StepRun move of start ${r.start_id} without its barrier` });
      }
      for (const r of await rowsOf(client, GLOBAL_ORDER_AGAINST_STREAMS, {}, t.type({ stream_id: t.string, stream_position: PgInt, global_position: PgInt }), 'event', 'global order')) {
        problems.push({ kind: 'event', record: `${r.stream_id}@${r.stream_position}`, problem: `global position ${r.global_position} is not after the one of the event before it in its stream` });
      }
      for (const r of await rowsOf(client, STREAM_HEADS, {}, StreamHeadRow, 'stream', 'heads')) {
        problems.push({ kind: 'stream_head', record: r.stream_id, problem: `stream head (type ${r.stream_type}) is at version ${r.version} but holds ${r.n} events (last position ${r.top ?? 'none'})` });
      }
      const claims = await rowsOf(client, CLAIM_ROWS, {}, t.type({ start_id: t.string, generation: PgInt, kind: t.string, driver_id: t.string, at_ms: PgInt, lease_until_ms: PgInt, claim_digest: t.union([t.string, t.null]), barrier_timeout_ms: t.union([PgInt, t.null]) }), 'driver claim', 'rows');
      problems.push(...claimHistoryProblems(claims as StoredClaimRow[]));
      problems.push(...(await compactionProblemsOn(client)));
      const { ledger, capabilities } = await readLedger(client);
      for (const problem of schemaProblems('postgres', ledger, capabilities)) problems.push({ kind: 'schema', record: 'schema', problem });
      for (const problem of schemaObjectProblems(await readSchemaObjects(client))) problems.push({ kind: 'schema', record: 'schema', problem });
      return problems;
    },
  };
};
