import type { EvidenceKeyring } from '../../application/evidenceKeys';
import { startEventCells } from '../../application/eventSeals';
import { INSERT_START_SEALS, sealParams, type PostgresSealer } from './postgresSeals';
import { INSERT_PLAN, planParams } from './postgresPlans';
import { CompareAndSetLostError, SemanticConflictError, replayKeysOf, noReplayHits, type DecodedStartCommand, type ReplayHit, type ReplayHits, type ReplayIdentity, type ReplayKeys } from '../../domain';
import { PgInt, ReplayIdentityRowCodec, decodeRow } from './rowCodecs';
import { paramOf } from './identities';
import { replayValuesOf } from '../../projections/rows';
import { existingBarrierOf, type StartTransactionResult, type StartUnitOfWork } from '../../application/startProtocol';
import type { StartWrite, StartWriteStep } from '../../application/startWritePlan';
import { SQLSTATE } from './errors';
import { identityOfViolation } from './identities';
import { run, type Queryable } from './query';
import { loadStepRunAtLogEnd, lookupReplay, readBarrier, requireHeadsAtLogEnd } from './reads';
import * as SQL from './sql';
import type { Tx } from './transactions';

// The start on PostgreSQL: the shared protocol's unit of work over one transaction, the write
// plan executed as one statement (batched) or one per step (stepwise), and the answer to a
// unique violation raised by a racer that committed the same identity first.

/**
 * `stepwise` runs R3.3 .. R3.7 as five statements with the fault-injection hook between them;
 * `batched` (default) runs them as one statement (one round trip) and calls the hook for each
 * step after it. Both write the same rows through the same SQL fragments (sql.ts).
 */
export type PostgresWriteMode = 'batched' | 'stepwise';

/** Every CTE reports its row count; a compare-and-set that matched nothing aborts (R5.2). */
export const checkCounts = (plan: StartWrite, rows: readonly Record<string, unknown>[]): void => {
  for (const [name, value] of Object.entries(rows[0] ?? {})) {
    const expected = SQL.expectedCountOf(plan, name);
    if (value === expected) continue;
    if (name.endsWith('_cas')) throw new CompareAndSetLostError(name, `it matched ${String(value)} rows while starting ${plan.startId}: the locked state moved`);
    throw new Error(`start ${plan.startId}: step ${name} wrote ${String(value)} rows, expected ${String(expected)}`);
  }
};

const writeStart = async (q: Queryable, plan: StartWrite, steps: readonly StartWriteStep[]): Promise<void> => {
  const sql = steps.length === 1 ? SQL.START_STEP_STATEMENTS[steps[0]!] : SQL.START_BATCHED_STATEMENT;
  if (steps.length !== 1 && steps.length !== Object.keys(SQL.START_STEP_STATEMENTS).length) throw new Error(`a start writes one step or all of them, not ${steps.join(', ')}`);
  if (sql !== null) checkCounts(plan, await run(q, sql, SQL.startParams(plan, steps))); // null: a head move the event trigger makes (sql.ts)
  // R12.2: the sealed plan with the barrier, in the start's transaction
  if (plan.invocationPlan !== undefined && steps.includes('barrier')) await run(q, INSERT_PLAN, planParams(plan.invocationPlan));
};

/** The replay hits read before BEGIN, with the Run's version at that moment (null: no Run). */
export interface LookupBeforeBegin {
  readonly hits: ReplayHits;
  readonly runVersion: number | null;
}

/** R3.1 before BEGIN (transactions.ts `BeforeBegin`): the lookup and the Run's version, one statement. */
export const lookupBeforeBegin = async (q: Queryable, keys: ReplayKeys, runId: string): Promise<LookupBeforeBegin> => {
  const values = replayValuesOf(keys);
  const rows = await run<{ run_version: unknown; identity: unknown }>(q, SQL.LOOKUP_REPLAY_AT_VERSION, {
    run_id: runId,
    ...Object.fromEntries(Object.entries(values).map(([identity, value]) => [paramOf(identity), value])),
  });
  const version = rows[0]?.run_version;
  const hits = noReplayHits() as Record<ReplayIdentity, ReplayHit[]>;
  for (const raw of rows) {
    if (raw.identity === null) continue;
    const r = decodeRow(ReplayIdentityRowCodec, raw, 'replay index', keys.startId);
    hits[r.identity] = [...hits[r.identity], { startId: r.start_id, commandDigest: r.command_digest }];
  }
  return { hits, runVersion: version === null || version === undefined ? null : decodeRow(PgInt, version, 'run', runId) };
};

/**
 * `tx.before`, when set, holds the replay hits read just before BEGIN: still the answer when
 * the Run is at the version it had then (no writer of this Run committed in between; replay
 * identities are immutable); otherwise the lookup runs again, inside the transaction.
 */
export const startUnitOfWork = (tx: Tx, mode: PostgresWriteMode, keys?: EvidenceKeyring, sealer?: PostgresSealer): StartUnitOfWork => ({
  lookupReplay: async (replayKeys) => {
    const before = tx.before as LookupBeforeBegin | undefined;
    return before !== undefined && before.runVersion === tx.turnVersion ? before.hits : lookupReplay(tx.client, replayKeys);
  },
  lockForStart: (runId, stepRunId) => loadStepRunAtLogEnd(tx.client, runId, stepRunId),
  readBarrier: (startId) => readBarrier(tx.client, startId, keys),
  clockMs: async () => tx.nowMs,
  writesAtOnce: mode === 'batched',
  writeStart: (plan, steps) => writeStart(tx.client, plan, steps),
  // one more statement, only when keyed: the unkeyed start keeps its round trips. It stores the
  // barrier's MAC and the seal of the start's five events together (R9.4).
  ...(keys === undefined || sealer === undefined
    ? {}
    : {
        sealEvidence: async (plan: StartWrite) => {
          const seal = await sealer(tx, plan.streamId, startEventCells(plan));
          await run(tx.client, INSERT_START_SEALS, { start_id: plan.startId, ...keys.seal(plan.result), ...sealParams(seal) });
        },
      }),
});

/**
 * A unique index refused a value: another transaction committed it after our lookup. Look
 * again in a fresh transaction: an exact replay is `existing`, anything else a typed conflict
 * (R4.2, R4.3), never a version conflict and never the raw 23505.
 */
export const resolveUniqueViolation = async (
  q: Queryable,
  decoded: DecodedStartCommand,
  violation: { readonly constraint?: string | undefined; readonly detail?: string | undefined },
  evidenceKeys?: EvidenceKeyring,
): Promise<StartTransactionResult> => {
  const c = decoded.command;
  const keys = replayKeysOf(c);
  const existing = await existingBarrierOf({ readBarrier: (id) => readBarrier(q, id, evidenceKeys) }, decoded, await lookupReplay(q, keys));
  if (existing !== null) return { outcome: 'existing', barrier: existing };
  const identity = identityOfViolation(violation) as ReplayIdentity | undefined;
  if (identity === undefined) {
    // not an identity of R4.1: a stream position taken under us is a lost compare-and-set, unless the heads are behind the log
    await requireHeadsAtLogEnd(q, c.stepRun.runId);
    throw new CompareAndSetLostError(`stream of Run ${c.stepRun.runId}`, `${SQLSTATE.uniqueViolation}: ${violation.constraint ?? 'unique index'} while starting ${c.startId}`);
  }
  const value = replayValuesOf(keys)[identity];
  throw new SemanticConflictError(identity, value, undefined, `${identity} ${value} is already used by another record (${violation.constraint ?? 'unique index'}) (R4.3)`);
};
