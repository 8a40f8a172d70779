import {
  CorruptRecordError,
  PreconditionError,
  SemanticConflictError,
  buildStartFactsWithJson,
  classifyReplay,
  replayKeysOf,
  replayKeysOfBarrier,
  type DecodedStartCommand,
  type ReplayHits,
  type ReplayIdentity,
  type ReplayKeys,
  type RunState,
} from '../domain';
import type { StartStepHook } from './authority';
import type { StoredBarrier } from '../domain/records';
import type { InvocationPlanRow } from './invocationPlans';
import { START_WRITE_STEPS, planStartWrite, type StartWrite, type StartWriteStep } from './startWritePlan';

// The start transaction every backend shares (R3.1 .. R3.8). A backend supplies a unit of work
// bound to one open transaction; this module fixes what happens in which order: the replay is
// classified once, a new start is decided and planned once (startWrite.ts), and the
// fault-injection hook fires from here only. It never calls an adapter and does no I/O of its
// own (R6.2).

export interface StartUnitOfWork {
  /** R3.1: every identity of R4.1, through the unique replay index (constant cost, R6.4). */
  lookupReplay(keys: ReplayKeys): Promise<ReplayHits>;
  /** R3.2: lock the Run head and the StepRun row, and return them as a (partial) Run state. */
  lockForStart(runId: string, stepRunId: string): Promise<RunState>;
  /** The database clock of this transaction (R3.10), read once; CLOCK_AT_WRITE when the write stamps it. */
  clockMs(): Promise<number>;
  /**
   * Execute these steps of the plan, in order; the barrier step also writes the plan's sealed
   * invocation plan when it has one (R12.2). A compare-and-set that matches no row must throw
   * (CompareAndSetLostError); a unique index that refuses a row throws the driver's error.
   * Returns the transaction's clock when the write stamped it (clockMs gave CLOCK_AT_WRITE).
   */
  writeStart(plan: StartWrite, steps: readonly StartWriteStep[]): Promise<number | void>;
  /**
   * true: the backend writes the whole plan at once (one PostgreSQL statement), and the hook
   * then fires for each step after it; false: one step at a time, the hook between them.
   */
  readonly writesAtOnce: boolean;
  /** A verified read of a barrier and its facts (R5.3), and its MAC when keyed (R9.4), for `existing`. */
  readBarrier(startId: string): Promise<StoredBarrier | null>;
  /** With a deployment keyring: store the new barrier's MAC, in this transaction (R9.4). */
  sealEvidence?(plan: StartWrite): Promise<void>;
}

export type StartTransactionResult = { outcome: 'created' | 'existing'; barrier: StoredBarrier };

const noHook: StartStepHook = () => undefined;

/** The value a command or a barrier holds for one identity of R4.1, comparable across both. */
const identityValue = (keys: ReplayKeys, identity: ReplayIdentity): string => {
  if (identity !== 'attempt') return keys[identity];
  const a = keys.attempt;
  return JSON.stringify([a.runId, a.stepRunId, a.startedStepRunVersion]);
};

/**
 * R4.3 and R9.3: drift is answered only from a barrier that holds the value. The index row that
 * binds this command's value to a start must be mirrored by that start's verified barrier;
 * otherwise the index is damaged (a stray or a changed row), which is not the caller's conflict.
 * Only on the refusal path: one barrier read.
 */
export const confirmedConflict = async (holders: Pick<StartUnitOfWork, 'readBarrier'>, decoded: DecodedStartCommand, refusal: unknown, hits?: ReplayHits): Promise<never> => {
  if (!(refusal instanceof SemanticConflictError) || refusal.existingStartId === undefined) throw refusal;
  // A compacted start has no barrier left to confirm it: its compaction record binds the identity (R14.2).
  if (hits?.[refusal.identity][0]?.compacted !== undefined) throw refusal;
  const holder = await holders.readBarrier(refusal.existingStartId);
  const where = `${refusal.identity} ${refusal.value}`;
  if (holder === null) throw new CorruptRecordError('replay index', where, `names start ${refusal.existingStartId}, which has no barrier`);
  if (identityValue(replayKeysOfBarrier(holder.record), refusal.identity) !== identityValue(replayKeysOf(decoded.command), refusal.identity)) {
    throw new CorruptRecordError('replay index', where, `binds it to start ${refusal.existingStartId}, whose barrier holds another ${refusal.identity}`);
  }
  throw refusal;
};

/**
 * R3.1 and R4.2: what the replay index's hits mean for this command. null: a new start. An
 * exact replay returns the stored barrier; drift throws the typed conflict (classifyReplay),
 * once the barrier it names confirms it (`holders` reads any start's barrier; by default `uow`).
 */
export const existingBarrierOf = async (
  uow: Pick<StartUnitOfWork, 'readBarrier'>,
  decoded: DecodedStartCommand,
  hits: ReplayHits,
  holders: Pick<StartUnitOfWork, 'readBarrier'> = uow,
): Promise<StoredBarrier | null> => {
  let decision: ReturnType<typeof classifyReplay>;
  try {
    decision = classifyReplay(decoded, hits);
  } catch (e) {
    return confirmedConflict(holders, decoded, e, hits);
  }
  if (decision.kind === 'new') return null;
  const barrier = await uow.readBarrier(decoded.command.startId);
  // The index said "this exact start exists"; the barrier must then be readable, or the
  // store is damaged: fail closed with the typed error (R5.3), never a raw one.
  if (barrier === null) throw new CorruptRecordError('replay index', decoded.command.startId, 'the index names this start but its barrier is missing');
  return barrier;
};

/**
 * R9.3: a command the replay index does not know, refused by the decision (its StepRun is not
 * where the command says), is refused so only if no barrier holds its startId either. A start
 * whose index rows were deleted would otherwise answer its own lost-response replay with a
 * stale-command error; the barrier read fails closed on the missing rows instead. Only on that
 * path: one probe by startId.
 */
export const refuseUnknownStart = async (uow: Pick<StartUnitOfWork, 'readBarrier'>, startId: string, refusal: unknown): Promise<never> => {
  if (refusal instanceof PreconditionError && (await uow.readBarrier(startId)) !== null) {
    throw new CorruptRecordError('replay index', startId, 'a barrier holds this start but the index does not name it');
  }
  throw refusal;
};

/**
 * R3.1 and R4.2, the first step of every start: the sealed plan checked against the command,
 * the replay index read and classified once. The stored barrier of an exact replay; null for a
 * new start; drift throws the typed conflict. Writes nothing and takes no lock, so a backend may
 * run it alone, before its write transaction (SQLite: an exact replay never takes the write lock).
 */
export const replayOf = async (
  uow: Pick<StartUnitOfWork, 'lookupReplay' | 'readBarrier'>,
  decoded: DecodedStartCommand,
  hook: StartStepHook = noHook,
  sealed?: InvocationPlanRow,
): Promise<StoredBarrier | null> => {
  const c = decoded.command;
  if (sealed !== undefined && (sealed.start_id !== c.startId || sealed.plan_digest !== c.admission.planDigest)) {
    throw new Error(`the sealed plan of start ${sealed.start_id} is not the plan of start ${c.startId}`);
  }
  const hits = await uow.lookupReplay(replayKeysOf(c));
  if (hook !== noHook) await hook('lookup');
  return existingBarrierOf(uow, decoded, hits);
};

/**
 * The body of one start transaction. The caller opens, commits or rolls back around it.
 * `sealed`: the start's sealed invocation plan (R12.2), written with the barrier, so a new start
 * commits barrier, facts and plan together; an exact replay writes nothing (its plan was
 * written with it).
 */
export const runStartTransaction = async (
  uow: StartUnitOfWork,
  decoded: DecodedStartCommand,
  hook: StartStepHook = noHook,
  sealed?: InvocationPlanRow,
): Promise<StartTransactionResult> => {
  const c = decoded.command;
  // Without a hook nothing is awaited between the steps: each await is a turn of the queue.
  const step = hook === noHook ? undefined : hook;
  // R3.1 first: the replay is classified once, by the index alone. A replay writes nothing, so
  // it takes no lock: the barrier it returns is immutable (R6.4), and locking the Run and
  // StepRun would only make a read a writing transaction.
  const existing = await replayOf(uow, decoded, hook, sealed);
  if (existing !== null) return { outcome: 'existing', barrier: existing };
  const state = await uow.lockForStart(c.stepRun.runId, c.stepRun.stepRunId);
  if (step !== undefined) await step('lock');
  let decided: ReturnType<typeof buildStartFactsWithJson>;
  try {
    decided = buildStartFactsWithJson(decoded, state);
  } catch (e) {
    return refuseUnknownStart(uow, c.startId, e);
  }
  const { facts, json } = decided;
  const planned = planStartWrite(facts, state, await uow.clockMs(), json);
  const plan: StartWrite = sealed === undefined ? planned : { ...planned, invocationPlan: sealed };
  let stamped: number | void = undefined;
  if (uow.writesAtOnce) {
    stamped = await uow.writeStart(plan, START_WRITE_STEPS);
    await uow.sealEvidence?.(plan);
    if (step !== undefined) for (const done of START_WRITE_STEPS) await step(done);
  } else {
    for (const done of START_WRITE_STEPS) {
      await uow.writeStart(plan, [done]);
      if (done === 'barrier') await uow.sealEvidence?.(plan);
      if (step !== undefined) await step(done);
    }
  }
  if (step !== undefined) await step('beforeCommit');
  return { outcome: 'created', barrier: stamped === undefined ? plan.result : { ...plan.result, committedAtMs: stamped } };
};
