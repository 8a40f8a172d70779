import { randomUUID } from 'node:crypto';
import {
  ExecutionRefusedError,
  PreconditionError,
  assertMayExecute,
  buildSagaStartCommand,
  decodeAdapterReport,
  decodeInspectReport,
  decodeToolStepTrigger,
  firstStep,
  isStartBarrierError,
  leaseMsOf,
  stepAfterInspect,
  type AdapterReport,
  type AdapterResultCode,
  type DriverClaim,
  type DriverClaims,
  type InspectReport,
  type InvocationPlan,
  type StartPlan,
  type ToolAdapter,
  type ToolStepTrigger,
  ValidationError,
} from '../domain';
import { Identity, decodeOrThrow, integer } from '../domain/codecs';
import type { RecoverableStartBarrierAuthority, StartOutcome, StoredBarrier } from './authority';
import { sagaTelemetry } from './telemetry';

// The orchestration saga (process manager) for one Tool StepRun attempt, over a real authority
// and a contracted adapter (domain/adapter.ts). The order is the whole point (R3.8): the
// adapter is reached only after `prepare` has returned, i.e. after the start committed, only
// while the attempt has no outcome fact, and only by the one driver holding the attempt's
// claim (R11.2). A driver that takes over an attempt an earlier driver held inspects before it
// invokes again; without `inspect` or idempotent starts it stops and leaves the attempt in
// doubt (at-most-once). The saga holds no state of its own: the barrier, the claims and the
// outcome fact are its state, so a replay after a crash or a lost response resumes from them.

/**
 * Execution opened explicitly on an authority (R11.3, ADR §6): without it the saga refuses to
 * invoke anything. `execution: 'enabled'` must be written out by the caller; nothing defaults it.
 */
// What a saga's caller types its arguments with, from the subpath that makes the saga.
export type { ToolStepTrigger, StartPlan, InvocationPlan, ToolAdapter, AdapterReport, InspectReport, ToolCallTelemetry } from '../domain';
export type { RecoverableStartBarrierAuthority, StartOutcome, StoredBarrier } from './authority';

export interface ExecutionAuthority {
  readonly authority: RecoverableStartBarrierAuthority;
  readonly executionEnabled: true;
  readonly claims: DriverClaims;
  close(): Promise<void>;
}

export interface ExecutionOptions {
  readonly execution: 'enabled';
  /** Where the claims live (default: beside the authority's own records, 0060 / pg-0034). */
  readonly claims?: DriverClaims;
}

/** Options of the saga and of execution: an object with known keys only (VALIDATION_FAILED naming the first other one). */
const refuseUnknown = (record: string, options: unknown, known: readonly string[], prefix = ''): void => {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new ValidationError(record, [{ path: prefix.slice(0, -1), reason: 'invalid_value', message: 'must be an object' }]);
  }
  const unknown = Object.keys(options).find((k) => !known.includes(k));
  if (unknown !== undefined) throw new ValidationError(record, [{ path: `${prefix}${unknown}`, reason: 'unknown_field', message: `unknown option (known: ${known.join(', ')})` }]);
};

export const openExecution = (authority: RecoverableStartBarrierAuthority, options: ExecutionOptions): ExecutionAuthority => {
  if ((options as { execution?: unknown } | undefined)?.execution !== 'enabled') {
    throw new ExecutionRefusedError('execution_disabled', "execution must be opened with { execution: 'enabled' }");
  }
  refuseUnknown('openExecution options', options, ['execution', 'claims']);
  const given = options.claims as Partial<Record<keyof DriverClaims, unknown>> | undefined;
  if (given !== undefined && (typeof given !== 'object' || given === null || !(['claim', 'release', 'history', 'close'] as const).every((m) => typeof given[m] === 'function'))) {
    throw new ValidationError('openExecution options', [{ path: 'claims', reason: 'invalid_value', message: 'must be a DriverClaims store (claim, release, history and close)' }]);
  }
  const claims = options.claims ?? authority.driverClaims();
  return { authority, executionEnabled: true, claims, close: () => claims.close() };
};

export interface ToolStepSagaOptions {
  readonly execution: ExecutionAuthority;
  readonly adapter: ToolAdapter;
  /** Recorded as `decidedBy` on the outcome facts this saga appends. */
  readonly sagaId?: string;
  /** Added to the barrier's timeout for the claim's lease: time to record the outcome (default 30 s). */
  readonly leaseGraceMs?: number;
  /** Business time of recorded outcomes (never their commit time). */
  readonly clock?: () => number;
  /** Fault injection between the adapter's answer and the recorded outcome (reliability only). */
  readonly hooks?: { readonly afterStart?: (startId: string) => void | Promise<void> };
}

interface SagaBase {
  readonly prepared: 'created' | 'existing';
  readonly barrier: StoredBarrier;
}

export type InDoubtWhy =
  /** `start` threw or timed out: the tool may or may not have acted. */
  | 'start_unknown'
  /** The adapter answered but the outcome could not be recorded. */
  | 'record_failed'
  /** An earlier driver may have invoked, and the adapter has neither inspect nor idempotent starts. */
  | 'no_inspect'
  | 'inspect_unknown'
  | 'inspect_running';

export type SagaResult =
  /** The outcome is now a fact: from the adapter's answer (`via: start`) or from inspect. */
  | (SagaBase & { readonly status: 'completed' | 'failed'; readonly invoked: boolean; readonly via: 'start' | 'inspect'; readonly outcome: StartOutcome; readonly report: AdapterReport | InspectReport })
  /** The attempt already had an outcome fact (replay, or decided by someone else meanwhile). */
  | (SagaBase & { readonly status: 'already_resolved'; readonly invoked: boolean; readonly outcome: StartOutcome })
  /** Another driver holds the attempt's claim: this one did nothing. */
  | (SagaBase & { readonly status: 'claimed_elsewhere'; readonly invoked: false; readonly holder: DriverClaim })
  /** Unknown or unrecordable outcome: recovery lists it, `inspect` may resolve it. */
  | (SagaBase & { readonly status: 'in_doubt'; readonly invoked: boolean; readonly why: InDoubtWhy; readonly error?: { readonly code?: string; readonly message: string } });

const describe = (e: unknown): { code?: string; message: string } =>
  isStartBarrierError(e) ? { code: e.code, message: e.message } : { message: e instanceof Error ? e.message : String(e) };

export interface ToolStepSaga {
  /**
   * Drive one attempt. A failing `prepare` (validation, precondition, conflict, timeout) or a
   * refused execution (R11.3) rejects with its typed error and the adapter is never reached.
   */
  drive(trigger: ToolStepTrigger, plan: StartPlan, invocation: InvocationPlan): Promise<SagaResult>;
}

const GraceMs = integer('LeaseGraceMs', 0, 3_600_000);
const SAGA_OPTIONS: readonly string[] = ['execution', 'adapter', 'sagaId', 'leaseGraceMs', 'clock', 'hooks'] satisfies readonly (keyof ToolStepSagaOptions)[];

/**
 * The options' shape, before any attempt: a misspelt option would silently not apply (a
 * `leaseGraceMS` leaves the default lease), and a clock or hook that is not a function would
 * fail only after the tool acted, leaving every attempt in doubt. (The execution authority and
 * the adapter are checked by the gate of each drive, R11.3, before anything is written.)
 */
const checkedSagaOptions = (options: unknown): ToolStepSagaOptions => {
  const record = 'createToolStepSaga options';
  refuseUnknown(record, options, SAGA_OPTIONS);
  const o = options as ToolStepSagaOptions;
  if (o.hooks !== undefined) refuseUnknown(record, o.hooks, ['afterStart'], 'hooks.');
  for (const [path, f] of [['clock', o.clock], ['hooks.afterStart', o.hooks?.afterStart]] as const) {
    if (f !== undefined && typeof f !== 'function') throw new ValidationError(record, [{ path, reason: 'invalid_value', message: 'must be a function' }]);
  }
  return o;
};

/** The business time of an outcome, read before the attempt so that a broken clock refuses it rather than strands it in doubt. */
const BusinessTime = integer('ClockMs', 0, Number.MAX_SAFE_INTEGER);

export const createToolStepSaga = (input: ToolStepSagaOptions): ToolStepSaga => {
  const options = checkedSagaOptions(input);
  const execution = options.execution as ExecutionAuthority | undefined;
  const sagaId = decodeOrThrow(Identity, 'sagaId', options.sagaId ?? 'orchestration-saga');
  // One driver id per saga instance: its claims say which process held an attempt.
  const driverId = `${sagaId.slice(0, 90)}.${randomUUID()}`;
  const graceMs = decodeOrThrow(GraceMs, 'leaseGraceMs', options.leaseGraceMs ?? 30_000);
  const configured = options.clock ?? Date.now;
  const clock = (): number => decodeOrThrow(BusinessTime, 'clock', configured());
  const telemetry = sagaTelemetry();

  return {
    // The trigger is typed for callers and still decoded here: it may come from a queue or JSON.
    drive: async (input, plan, invocation) => {
      const trigger = decodeToolStepTrigger(input);
      return telemetry.drive(trigger, () => driveTriggered(trigger, plan, invocation));
    },
  };

  async function driveTriggered(trigger: ToolStepTrigger, plan: StartPlan, invocation: InvocationPlan): Promise<SagaResult> {
    if (execution?.executionEnabled !== true) throw new ExecutionRefusedError('execution_disabled', 'the saga was given no authority opened with execution enabled');
    const authority = execution.authority;
    const view = await authority.runs.getStepRun(trigger.runId, trigger.stepRunId);
    if (view === null) throw new PreconditionError('step_run_not_found', `StepRun ${trigger.stepRunId} does not exist in Run ${trigger.runId}`);
    const { digest: _digest, ...stepRun } = view;

    const command = buildSagaStartCommand(plan, trigger, stepRun);
    // The gate comes before prepare: a refused execution commits no start to be in doubt about.
    const adapter = assertMayExecute(execution.executionEnabled, options.adapter, command, invocation);
    clock(); // likewise a clock that cannot stamp the outcome
    const prepared = await authority.barriers.prepare(command);
    const barrier = prepared.barrier;
    const startId = barrier.record.startId;
    const base = { prepared: prepared.outcome, barrier };

    const resolved = async (invoked: boolean): Promise<SagaResult | null> => {
      const known = await authority.recovery.outcome(startId);
      return known === null ? null : { ...base, status: 'already_resolved', invoked, outcome: known };
    };
    const before = await resolved(false);
    if (before !== null) return before;

    const claimed = await execution.claims.claim(startId, driverId, leaseMsOf(barrier.record.admission.timeoutMs, graceMs));
    if (claimed.status === 'held') return { ...base, status: 'claimed_elsewhere', invoked: false, holder: claimed.holder };
    const claim = claimed.claim;
    // Whatever happens next, this generation ends here: the next driver inspects first.
    const done = async (result: SagaResult): Promise<SagaResult> => {
      await execution.claims.release(claim).catch(() => undefined);
      return result;
    };

    // An earlier driver may have recorded the outcome between our read and our claim.
    const meanwhile = await resolved(false);
    if (meanwhile !== null) return done(meanwhile);

    const record = async (outcome: 'completed' | 'failed', code: AdapterResultCode, report: AdapterReport | InspectReport, invoked: boolean, via: 'start' | 'inspect'): Promise<SagaResult> => {
      try {
        const recorded = await authority.recovery.resolve(startId, outcome, {
          decidedBy: sagaId,
          reason: code,
          requestedAtMs: clock(),
          ...(report.outputDigest === undefined ? {} : { outcomeDigest: report.outputDigest }),
        });
        if (recorded.outcome.outcome !== outcome) return done({ ...base, status: 'already_resolved', invoked, outcome: recorded.outcome });
        return done({ ...base, status: outcome, invoked, via, outcome: recorded.outcome, report });
      } catch (e) {
        // Someone (an operator) may have decided meanwhile; their fact stands, ours is not written.
        const decided = await resolved(invoked).catch(() => null);
        return done(decided ?? { ...base, status: 'in_doubt', invoked, why: 'record_failed', error: describe(e) });
      }
    };

    let step = firstStep(claim, adapter);
    if (step.kind === 'inspect') {
      let inspected: InspectReport;
      try {
        inspected = decodeInspectReport(await adapter.inspect!(startId));
      } catch {
        inspected = { state: 'unknown' };
      }
      const next = stepAfterInspect(inspected.state, adapter.declaration.guarantees);
      if (next.kind === 'record') return record(next.outcome, next.code, inspected, false, 'inspect');
      step = next;
    }
    if (step.kind === 'in_doubt') return done({ ...base, status: 'in_doubt', invoked: false, why: step.why });

    let report: AdapterReport;
    try {
      const context = { barrier: barrier.record, barrierDigest: barrier.barrierDigest, committedAtMs: barrier.committedAtMs, timeoutMs: barrier.record.admission.timeoutMs };
      report = decodeAdapterReport(await telemetry.invoke(adapter, startId, () => adapter.start(context, invocation)));
    } catch (e) {
      return done({ ...base, status: 'in_doubt', invoked: true, why: 'start_unknown', error: describe(e) });
    }
    await options.hooks?.afterStart?.(startId);
    return record(report.outcome, report.code, report, true, 'start');
  }
};
