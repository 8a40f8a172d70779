import { REPLAY_IDENTITIES, streamNameOf, type ReplayIdentity } from '../../domain';
import type Database from 'better-sqlite3';
import type { StartOutcomeRow } from '../../projections/outcomeRows';
import type { RunRow, StepRunRow } from '../../projections/rows';
import type { EventRow } from '../../domain/eventRows';
import type { StreamHeads } from '../../application/checks/readChecks';
import type { StoredBarrier, VerifyProblem } from '../../domain/records';
import { evidenceProblemOf, type InDoubtIndexRow, type RecoveryView } from '../../application/recoveryRules';
import type { SealedSpan } from '../../application/eventSeals';
import { claimHistoryProblems, type StoredClaimRow } from '../../application/driverClaimRules';
import { schemaProblems } from '../migrations';
import { compactedPositionRanges, compactionProblems, type CompactedIdentityRow, type CompactionRow } from '../../application/retentionRules';
import { readLedger, requireLedgerReachesHeader, schemaObjectProblems } from './fileIdentity';
import * as RSQL from './recoverySql';
import * as SQL from './sql';

// The SQLite side of the recovery read models: the per-snapshot view that
// `application/recoveryRules.ts` runs its rules over. Synchronous better-sqlite3 calls, called
// only inside the authority's serial read transaction on its one connection (R5.1).

export interface SqliteRecoveryHost {
  readonly db: Database.Database;
  /** The authority's R5.3-verified barrier read. */
  readBarrier(startId: string): StoredBarrier | null;
  nowMs(): number;
  /** The heads of one Run and where its log ends (reads.ts streamHeadsOf). */
  runHeads(runId: string): StreamHeads;
  /** Keyed evidence (R9.4): what a seal check of positions from..to of one stream reads. */
  sealedSpan(streamId: string, from: number, to: number): SealedSpan;
}

interface ForeignKeyViolation {
  table: string;
  rowid: number | null;
  parent: string;
  fkid: number;
}

export const createSqliteRecoveryView = (host: SqliteRecoveryHost): RecoveryView => {
  const db = host.db;
  const p = (sql: string) => db.prepare(sql);
  const s = {
    inDoubt: p(RSQL.IN_DOUBT),
    inDoubtPage: Object.fromEntries(Object.entries(RSQL.IN_DOUBT_PAGE).map(([k, sql]) => [k, p(sql)])) as Record<keyof typeof RSQL.IN_DOUBT_PAGE, Database.Statement>,
    inDoubtIndexAfter: p(RSQL.IN_DOUBT_INDEX_AFTER),
    resolvedRuns: p(RSQL.RESOLVED_RUN_IDS),
    attempts: p(RSQL.ATTEMPT_START_IDS),
    started: p(SQL.SELECT_STREAM_EVENTS_OF_TYPE),
    identity: Object.fromEntries(Object.entries(RSQL.IDENTITY_START_IDS).map(([k, sql]) => [k, p(sql)])) as Record<keyof typeof RSQL.IDENTITY_START_IDS, Database.Statement>,
    outcomes: p(RSQL.OUTCOME_ROWS),
    event: p(RSQL.EVENT_BY_ID),
    stepRun: p(SQL.SELECT_STEP_RUN),
    running: p(RSQL.RUNNING_STEP_RUNS),
    counts: p(RSQL.COUNTS),
    barrierIds: p(RSQL.BARRIER_IDS_AFTER),
    outcomeRows: p(RSQL.OUTCOME_ROWS_AFTER),
    runRows: p(RSQL.RUN_ROWS_AFTER),
    stepRunRows: p(RSQL.STEP_RUN_ROWS_AFTER),
    eventRowsByStream: p(RSQL.EVENT_ROWS_BY_STREAM_AFTER),
    runRow: p(RSQL.RUN_ROW),
    stepRunRowsOfRun: p(RSQL.STEP_RUN_ROWS_OF_RUN),
    duplicateIdentities: p(RSQL.DUPLICATE_IDENTITIES),
    strayIdentities: p(RSQL.STRAY_IDENTITIES),
    duplicateAttempts: p(RSQL.DUPLICATE_ATTEMPTS),
    evidence: p(RSQL.EVIDENCE_WITHOUT_MOVE),
    mutations: p(RSQL.MUTATIONS_WITHOUT_BARRIER),
    streamHeads: p(RSQL.STREAM_HEADS),
  };
  const ids = (rows: unknown[]): string[] => (rows as { start_id: string }[]).map((r) => r.start_id);

  return {
    nowMs: async () => host.nowMs(),
    inDoubtStartIds: async (f) =>
      ids(s.inDoubt.all({ project_id: f.projectId ?? null, run_id: f.runId ?? null, cutoff_ms: f.committedAtOrBeforeMs ?? null, limit: f.limit ?? null })),
    resolvedRunIds: async (f) =>
      (s.resolvedRuns.all({ project_id: f.projectId ?? null, run_id: f.runId ?? null, cutoff_ms: f.committedAtOrBeforeMs ?? null }) as { run_id: string }[]).map((r) => r.run_id),
    attemptStartIds: async (runId, stepRunId) => ids(s.attempts.all(runId, stepRunId)),
    stepRunStartedRows: async (runId) => s.started.all(streamNameOf(runId), 'StepRunStarted') as EventRow[],
    stepRunCreatedRows: async (runId) => s.started.all(streamNameOf(runId), 'StepRunCreated') as EventRow[],
    identityStartIds: async (identity, key, attempt) =>
      ids(
        identity === 'attempt'
          ? s.identity.attempt.all({ identity, key, run_id: attempt?.runId ?? null, step_run_id: attempt?.stepRunId ?? null, version: attempt?.startedStepRunVersion ?? null })
          : s.identity[identity].all({ identity, key }),
      ),
    readBarrier: async (startId) => host.readBarrier(startId),
    outcomeRows: async (startId) => s.outcomes.all(startId) as StartOutcomeRow[],
    eventById: async (eventId) => s.event.get(eventId) as EventRow | undefined,
    stepRunRow: async (runId, stepRunId) => s.stepRun.get(runId, stepRunId) as StepRunRow | undefined,
    runHeads: async (runId) => host.runHeads(runId),
    runningStepRuns: async (f) => s.running.all({ project_id: f.projectId ?? null, run_id: f.runId ?? null, limit: f.limit ?? null }) as StepRunRow[],
    inDoubtIndexPage: async (f) => {
      const scope = f.runId === undefined ? (f.projectId === undefined ? 'store' : 'project') : f.projectId === undefined ? 'run' : 'projectRun';
      const params = { cutoff_ms: f.committedAtOrBeforeMs ?? Number.MAX_SAFE_INTEGER, limit: f.limit, ...(f.projectId === undefined ? {} : { project_id: f.projectId }), ...(f.runId === undefined ? {} : { run_id: f.runId }) };
      return s.inDoubtPage[scope].all(params) as InDoubtIndexRow[];
    },
    inDoubtIndexRowsAfter: async (after, limit) => s.inDoubtIndexAfter.all(after, limit) as InDoubtIndexRow[],

    counts: async () => {
      const c = s.counts.get() as { barriers: number; outcomes: number; runs: number; step_runs: number; events: number };
      return { barriers: c.barriers, outcomes: c.outcomes, runs: c.runs, stepRuns: c.step_runs, events: c.events };
    },
    barrierIdsAfter: async (after, limit) => ids(s.barrierIds.all(after, limit)),
    outcomeRowsAfter: async (after, limit) => s.outcomeRows.all(after, limit) as StartOutcomeRow[],
    runRowsAfter: async (after, limit) => s.runRows.all(after, limit) as (RunRow & { stream_version: number | null })[],
    stepRunRowsAfter: async (after, limit) => s.stepRunRows.all(after[0], after[1], limit) as StepRunRow[],
    eventRowsByStreamAfter: async (after, limit) => s.eventRowsByStream.all(after[0], after[1], limit) as (EventRow & { global_position: number })[],
    headsOfRun: async (runId) => ({
      run: s.runRow.get(runId) as (RunRow & { stream_version: number | null }) | undefined,
      stepRuns: s.stepRunRowsOfRun.all(runId) as StepRunRow[],
    }),
    sealedSpan: async (streamId, from, to) => host.sealedSpan(streamId, from, to),

    integrityProblems: async () => {
      const problems: VerifyProblem[] = [];
      // The foreign keys of the barrier (R5.1) and of every other table, as SQLite sees them.
      for (const v of db.pragma('foreign_key_check') as ForeignKeyViolation[]) {
        problems.push({ kind: 'foreign_key', record: `${v.table} rowid ${v.rowid ?? '?'}`, problem: `references a missing ${v.parent} row (foreign key ${v.fkid})` });
      }
      for (const r of s.duplicateIdentities.all() as { identity: string; value: string; n: number; starts: string }[]) {
        problems.push({ kind: 'duplicate_identity', record: `${r.identity} ${r.value}`, problem: `bound to ${r.n} barriers: ${r.starts} (R4.1)` });
      }
      for (const r of s.strayIdentities.all() as { identity: string; value: string; start_id: string }[]) {
        problems.push({ kind: 'stray_identity', record: `${r.identity} ${r.value}`, problem: `names start ${r.start_id}, whose barrier does not hold this value (R4.1)` });
      }
      for (const r of s.duplicateAttempts.all() as { run_id: string; step_run_id: string; started_step_run_version: number; n: number; starts: string }[]) {
        problems.push({
          kind: 'duplicate_attempt',
          record: `${r.run_id}/${r.step_run_id} v${r.started_step_run_version}`,
          problem: `${r.n} barriers for one attempt: ${r.starts} (R4.1)`,
        });
      }
      for (const r of s.evidence.all() as { table_name: string; record_id: string; start_id: string; has_move: number; has_barrier: number }[]) {
        problems.push(evidenceProblemOf(r));
      }
      for (const r of s.mutations.all() as { mutation_id: string; start_id: string }[]) {
        problems.push({ kind: 'mutation_without_barrier', record: `step_run_mutations ${r.mutation_id}`, problem: `StepRun move of start ${r.start_id} without its barrier` });
      }
      for (const r of s.streamHeads.all() as { stream_id: string; version: number; n: number; top: number | null }[]) {
        problems.push({ kind: 'stream_head', record: r.stream_id, problem: `stream head is at version ${r.version} but holds ${r.n} events (last position ${r.top ?? 'none'})` });
      }
      const order = p(RSQL.GLOBAL_ORDER).get() as { n: number; lo: number | null; hi: number | null };
      // R14.2: the positions compaction removed are the log's too; an event never holds one of them
      const records = p(RSQL.COMPACTION_RECORDS).all() as CompactionRow[];
      const removed = compactedPositionRanges(records);
      const compacted = removed.reduce((n, [from, to]) => n + to - from + 1, 0);
      const inRemoved = removed.reduce((n, [from, to]) => n + (p(RSQL.EVENTS_BETWEEN).get(from, to) as { n: number }).n, 0);
      if (order.n > 0 && (order.hi !== order.n + compacted || inRemoved > 0 || (compacted === 0 && order.lo !== 1))) {
        problems.push({ kind: 'event', record: 'events', problem: `${order.n} events hold global positions ${order.lo}..${order.hi}, not 1..${order.n + compacted} with ${compacted} compacted` });
      }
      problems.push(
        ...compactionProblems({
          records,
          identities: p(RSQL.COMPACTED_IDENTITIES).all() as CompactedIdentityRow[],
          isLive: (identity, value) => (REPLAY_IDENTITIES as readonly string[]).includes(identity) && p(RSQL.LIVE_IDENTITY[identity as ReplayIdentity]).get(value) !== undefined,
          runHasRows: (runId) => p(RSQL.RUN_HAS_ROWS).get(runId, streamNameOf(runId)) !== undefined,
        }),
      );
      for (const r of p(RSQL.GLOBAL_ORDER_AGAINST_STREAMS).all() as { stream_id: string; stream_position: number; global_position: number }[]) {
        problems.push({ kind: 'event', record: `${r.stream_id}@${r.stream_position}`, problem: `global position ${r.global_position} is not after the one of the event before it in its stream` });
      }
      problems.push(...claimHistoryProblems(p(RSQL.CLAIM_ROWS).all() as StoredClaimRow[]));
      const { ledger, capabilities } = readLedger(db);
      for (const problem of schemaProblems('sqlite', ledger, capabilities)) problems.push({ kind: 'schema', record: 'schema', problem });
      for (const problem of schemaObjectProblems(db)) problems.push({ kind: 'schema', record: 'schema', problem });
      try {
        requireLedgerReachesHeader(db, ledger);
      } catch (e) {
        problems.push({ kind: 'schema', record: 'schema', problem: (e as Error).message });
      }
      return problems;
    },
  };
};
