import {
  decideDecodedStart,
  decideLifecycle,
  decodeLifecycleCommand,
  evolve,
  replayKeysOf,
  type DecodedStartCommand,
  type LifecycleCommand,
  type ReplayHits,
  type ReplayKeys,
  type RunState,
  type RunStreamEvent,
  type StartFacts,
} from '../domain';
import type { StartStepHook, StoredBarrier } from './authority';

// The transaction protocol both storage backends share. A backend supplies a unit of work
// bound to one open transaction; this module fixes the order of R3.1 .. R3.8 so SQLite and
// PostgreSQL cannot drift apart. It never calls an adapter and does no I/O of its own (R6.2).

export interface StartUnitOfWork {
  /** R3.1: every identity of R4.1, through the unique replay index (constant cost, R6.4). */
  lookupReplay(keys: ReplayKeys): Promise<ReplayHits>;
  /** R3.2: lock the Run head and the StepRun row, and return them as a (partial) Run state. */
  lockForStart(runId: string, stepRunId: string): Promise<RunState>;
  /**
   * R3.3 .. R3.7 in order, calling `hook` after each step. The expected Run and StepRun
   * versions in `before` are the compare-and-set values; a failed CAS must throw.
   */
  appendStart(facts: StartFacts, before: RunState, hook: StartStepHook): Promise<StoredBarrier>;
  /** A verified read of a barrier and its facts (R5.3), for `existing`. */
  readBarrier(startId: string): Promise<StoredBarrier | null>;
}

export type StartTransactionResult = { outcome: 'created' | 'existing'; barrier: StoredBarrier };

const noHook: StartStepHook = () => undefined;

/** The body of one start transaction. The caller opens, commits or rolls back around it. */
export const runStartTransaction = async (
  uow: StartUnitOfWork,
  decoded: DecodedStartCommand,
  hook: StartStepHook = noHook,
): Promise<StartTransactionResult> => {
  const c = decoded.command;
  const hits = await uow.lookupReplay(replayKeysOf(c));
  await hook('lookup');
  const state = await uow.lockForStart(c.stepRun.runId, c.stepRun.stepRunId);
  await hook('lock');
  const facts = decideDecodedStart(decoded, hits, state);
  if (facts.length === 0) {
    const barrier = await uow.readBarrier(c.startId);
    // The index said "this exact start exists"; the barrier must then be readable.
    if (barrier === null) throw new Error(`replay index names start ${c.startId} but its barrier is missing`);
    return { outcome: 'existing', barrier };
  }
  const barrier = await uow.appendStart(facts, state, hook);
  await hook('beforeCommit');
  return { outcome: 'created', barrier };
};

export interface LifecycleUnitOfWork {
  /** Lock and load the Run head and the StepRuns this command touches. */
  lockForLifecycle(runId: string, stepRunId: string | undefined): Promise<RunState>;
  /** Append with the Run version in `before` as the expected version; update projections. */
  appendLifecycle(events: readonly RunStreamEvent[], before: RunState, after: RunState): Promise<void>;
}

export interface LifecycleDecision {
  readonly command: LifecycleCommand;
  readonly events: RunStreamEvent[];
  readonly after: RunState;
}

export const decodeLifecycle = decodeLifecycleCommand;

export const stepRunIdOf = (command: LifecycleCommand): string | undefined =>
  command.type === 'CreateRun' ? undefined : command.data.stepRunId;

/** Body of one lifecycle transaction: lock, fold what is needed, decide, append. */
export const runLifecycleTransaction = async (uow: LifecycleUnitOfWork, command: LifecycleCommand): Promise<LifecycleDecision> => {
  const before = await uow.lockForLifecycle(command.data.runId, stepRunIdOf(command));
  const events = decideLifecycle(command, before);
  const after = events.reduce(evolve, before);
  await uow.appendLifecycle(events, before, after);
  return { command, events, after };
};
