import { assertExpectedVersionMatchesCurrent, type ExpectedStreamVersion } from '@event-driven-io/emmett';
import {
  CorruptRecordError,
  PreconditionError,
  START_FACT_TYPES,
  ValidationError,
  decodeRunEvent,
  decideLifecycle,
  decodeLifecycleCommand,
  evolve,
  isCodedReason,
  isOutcomeEventType,
  OUTCOME_REASON_CODES,
  stepRunTable,
  type LifecycleCommand,
  type RunState,
  type RunStreamEvent,
} from '../domain';
import type { StoredBarrier } from '../domain/records';
import type { EventRow } from '../domain/eventRows';
import { requireHeadIsItsLog } from './checks/readChecks';

// The lifecycle protocol every backend shares: orchestration's commands (decided here) and
// emmett's appendToStream (decided by the caller, re-checked here). A backend supplies a unit of
// work bound to one open transaction; this module does no I/O of its own.

export interface LifecycleUnitOfWork {
  /** Lock and load the Run head and the StepRuns this command touches. */
  lockForLifecycle(runId: string, stepRunId: string | undefined): Promise<RunState>;
  /** A verified read of a barrier and its facts (R5.3), in this transaction. */
  readBarrier(startId: string): Promise<StoredBarrier | null>;
  /**
   * The Run's first event and the StepRun's events in version order (what its head must fold
   * to), read only on a refusal and for an outcome.
   */
  stepRunLog(runId: string, stepRunId: string): Promise<[runCreated: EventRow | undefined, log: EventRow[]]>;
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

/**
 * R9.3: an outcome closes the start its StepRun runs, so that start's barrier and facts must read
 * verified first, and the StepRun's head must be what its own events in the log make: an
 * outcome appended over damaged evidence or a damaged StepRun history would take the start off
 * the in-doubt list with nothing sound behind it. One verified barrier read and one read of the
 * StepRun's events per outcome event.
 */
const requireClosedStartsSound = async (uow: LifecycleUnitOfWork, before: RunState, events: readonly RunStreamEvent[]): Promise<void> => {
  for (const e of events) {
    if (!isOutcomeEventType(e.type) || !('startId' in e.data)) continue;
    const startId = e.data.startId;
    if ((await uow.readBarrier(startId)) === null) throw new CorruptRecordError('start barrier', startId, 'its StepRun runs this start, but its barrier row is missing');
    const s = 'stepRunId' in e.data ? before.stepRuns[e.data.stepRunId] : undefined;
    if (s !== undefined) requireHeadIsItsLog(s, ...(await uow.stepRunLog(s.runId, s.stepRunId)));
  }
};

/**
 * R9.3: a refusal decided on a StepRun head stands only where that head ends where its log ends.
 * A head left past its log (its last events deleted, the Run heads set back with them) is
 * damage, CORRUPT_RECORD, not a precondition to act on. The log is read on a refusal only.
 */
const decidedOnSoundHeads = async <T>(uow: LifecycleUnitOfWork, runId: string, before: RunState, decide: () => T): Promise<T> => {
  try {
    return decide();
  } catch (e) {
    if (e instanceof PreconditionError) {
      for (const s of Object.values(before.stepRuns)) requireHeadIsItsLog(s, ...(await uow.stepRunLog(runId, s.stepRunId)));
    }
    throw e;
  }
};

/** Body of one lifecycle transaction: lock, fold what is needed, decide, append. */
export const runLifecycleTransaction = async (uow: LifecycleUnitOfWork, command: LifecycleCommand): Promise<LifecycleDecision> => {
  const before = await uow.lockForLifecycle(command.data.runId, stepRunIdOf(command));
  const events = await decidedOnSoundHeads(uow, command.data.runId, before, () => decideLifecycle(command, before));
  const after = events.reduce(evolve, before);
  await requireClosedStartsSound(uow, before, events);
  await uow.appendLifecycle(events, before, after);
  return { command, events, after };
};

/** The same transitions the lifecycle decider allows, for events decided elsewhere. */
const ALLOWED_FROM: Partial<Record<string, readonly string[]>> = {
  StepRunReady: ['created', 'lost'],
  StepRunAwaitingApproval: ['created', 'lost'],
  StepRunLost: ['running'],
  StepRunCompleted: ['running'],
  StepRunFailed: ['running'],
};

/**
 * emmett's `appendToStream` for a Run stream: lifecycle events only, with every
 * expected-version mode enforced strictly. Start facts are refused here: they are appended
 * only by `barriers.prepare`, in one transaction with their barrier (R7.1, R7.2).
 */
export const runAppendTransaction = async (
  uow: LifecycleUnitOfWork,
  runId: string,
  input: readonly { type: string; data: unknown }[],
  expected: ExpectedStreamVersion | undefined,
): Promise<{ before: RunState; after: RunState; events: RunStreamEvent[] }> => {
  const events = input.map((e, i) => {
    if ((START_FACT_TYPES as readonly string[]).includes(e.type)) {
      throw new ValidationError('event', [{ path: `[${i}].type`, reason: 'forbidden_value', message: `${e.type} is appended only by barriers.prepare, with its barrier (R7.1)` }]);
    }
    let decoded: RunStreamEvent;
    try {
      decoded = decodeRunEvent(e.type, e.data, `appended event ${i}`);
    } catch (error) {
      throw new ValidationError('event', [{ path: `[${i}]`, reason: 'invalid_value', message: (error as Error).message }]);
    }
    // R10.2: free-text reasons are read as legacy records only; a new outcome fact carries a code
    if ('resolution' in decoded.data && !isCodedReason(decoded.data.resolution.reason)) {
      throw new ValidationError('event', [{ path: `[${i}].data.resolution.reason`, reason: 'invalid_value', message: `expected one of ${OUTCOME_REASON_CODES.join(', ')} (R10.2: no free text in evidence)` }]);
    }
    return decoded;
  });
  const stepRunIds = [...new Set(events.flatMap((e) => ('stepRunId' in e.data ? [e.data.stepRunId] : [])))];
  let before = await uow.lockForLifecycle(runId, stepRunIds[0]);
  for (const id of stepRunIds.slice(1)) {
    const more = await uow.lockForLifecycle(runId, id);
    before = { run: before.run, stepRuns: stepRunTable([...Object.entries(before.stepRuns), ...Object.entries(more.stepRuns)]) };
  }
  assertExpectedVersionMatchesCurrent(BigInt(before.run?.version ?? 0), expected, 0n);
  // The caller decided these events; we still refuse any that would rewrite history.
  const after = await decidedOnSoundHeads(uow, runId, before, () => events.reduce((state, e, i) => {
    if (e.type === 'RunCreated' && state.run !== null) throw new PreconditionError('run_exists', `event ${i}: Run ${runId} already exists`);
    if (e.type !== 'RunCreated' && state.run === null) throw new PreconditionError('run_not_found', `event ${i}: Run ${runId} does not exist`);
    const owner = 'runId' in e.data ? e.data.runId : undefined;
    if (owner !== runId) throw new ValidationError('event', [{ path: `[${i}].data.runId`, reason: 'invalid_value', message: `event belongs to Run ${owner ?? '(none)'}, not ${runId}` }]);
    if ('stepRunVersion' in e.data) {
      const current = state.stepRuns[e.data.stepRunId];
      const allowed = ALLOWED_FROM[e.type];
      if (allowed !== undefined && (current === undefined || !allowed.includes(current.status))) {
        throw new PreconditionError('invalid_transition', `event ${i}: ${e.type} cannot follow status ${current?.status ?? '(none)'}`);
      }
      if ('startId' in e.data && current?.lastStartId !== e.data.startId) {
        throw new PreconditionError('invalid_transition', `event ${i}: ${e.type} names start ${e.data.startId}, the StepRun's attempt is ${current?.lastStartId ?? '(none)'}`);
      }
      const prior = current?.version ?? 0;
      if (e.type === 'StepRunCreated' && prior !== 0) throw new PreconditionError('step_run_exists', `event ${i}: StepRun ${e.data.stepRunId} already exists`);
      if (e.type !== 'StepRunCreated' && prior === 0) throw new PreconditionError('step_run_not_found', `event ${i}: StepRun ${e.data.stepRunId} does not exist`);
      if (e.data.stepRunVersion !== prior + 1) {
        throw new PreconditionError('version_mismatch', `event ${i}: StepRun ${e.data.stepRunId} is at version ${prior}, the event moves it to ${e.data.stepRunVersion}`);
      }
    }
    return evolve(state, e);
  }, before));
  if (after.run === null || after.run.runId !== runId) throw new PreconditionError('run_not_found', `events do not create or continue Run ${runId}`);
  await requireClosedStartsSound(uow, before, events);
  await uow.appendLifecycle(events, before, after);
  return { before, after, events };
};
