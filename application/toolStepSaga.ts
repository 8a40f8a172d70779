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
  splitAnswer,
  stepAfterInspect,
  type AdapterReport,
  type AdapterResultCode,
  type DriverClaim,
  type DriverClaims,
  type ExecutionTicket,
  type InspectReport,
  type InvocationPlan,
  type StartPlan,
  type ToolStepTrigger,
  type ToolAdapter,
  type ToolOutput,
  ValidationError,
} from '../domain';
import { Identity, decodeOrThrow, integer } from '../domain/codecs';
import type { StartOutcome, StoredBarrier } from '../domain/records';
import { CLAIM_LEASE_GRACE_MS } from './driverClaimRules';
import { ExecutionAuthority, refuseUnknown, type ExecutionPort } from './execution';
import type { RedactionContract } from './invocationPlans';
import { sagaTelemetry } from './telemetry';

// The orchestration saga (process manager) for one Tool StepRun attempt, over a real authority
// and a contracted adapter (domain/adapter.ts). The order is the whole point (R3.8): the
// adapter is reached only after `prepare` has returned, i.e. after the start committed, only
// while the attempt has no outcome fact, and only by the one driver holding the attempt's
// claim (R11.2). A driver that takes over an attempt an earlier driver held inspects before it
// invokes again; without `inspect` or idempotent starts it stops and leaves the attempt in
// doubt (at-most-once). The saga holds no state of its own: the barrier, the claims and the
// outcome fact are its state, so a replay after a crash or a lost response resumes from them.


export interface ToolStepSagaOptions {
  readonly execution: ExecutionAuthority;
  readonly adapter: ToolAdapter;
  /** Recorded as `decidedBy` on the outcome facts this saga appends. */
  readonly sagaId?: string;
  /** Added to the barrier's timeout for the claim's lease: time to record the outcome (default 30 s, at most CLAIM_LEASE_GRACE_MS). */
  readonly leaseGraceMs?: number;
  /** Business time of recorded outcomes (never their commit time). */
  readonly clock?: () => number;
  /**
   * What operators may see of the tool input (R12.2): the fields of the redacted preview, by
   * the redaction contract the command names. Default: none.
   */
  readonly redaction?: RedactionContract;
  /** Fault injection after the plan is sealed, and between the adapter's answer and the recorded outcome (reliability only). */
  readonly hooks?: { readonly afterSeal?: (startId: string) => void | Promise<void>; readonly afterStart?: (startId: string) => void | Promise<void> };
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
  | (SagaBase & {
      readonly status: 'completed' | 'failed';
      readonly invoked: boolean;
      readonly via: 'start' | 'inspect';
      readonly outcome: StartOutcome;
      readonly report: AdapterReport | InspectReport;
      /** The tool's output as the adapter returned it (bounded; never recorded), when it could. */
      readonly output?: ToolOutput;
    })
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
  /**
   * Re-drive a committed start from what is stored alone (R12.2): its barrier and its sealed
   * invocation plan, after a restart. A plan that was shredded is EXECUTION_REFUSED
   * (plan_unavailable), one that was changed CORRUPT_RECORD; either way no adapter runs.
   */
  resume(startId: string): Promise<SagaResult>;
}

const GraceMs = integer('LeaseGraceMs', 0, CLAIM_LEASE_GRACE_MS);
const SAGA_OPTIONS: readonly string[] = ['execution', 'adapter', 'sagaId', 'leaseGraceMs', 'clock', 'redaction', 'hooks'] satisfies readonly (keyof ToolStepSagaOptions)[];

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
  if (o.hooks !== undefined) refuseUnknown(record, o.hooks, ['afterSeal', 'afterStart'], 'hooks.');
  if (o.redaction !== undefined) refuseUnknown(record, o.redaction, ['fields'], 'redaction.');
  for (const [path, f] of [['clock', o.clock], ['hooks.afterSeal', o.hooks?.afterSeal], ['hooks.afterStart', o.hooks?.afterStart]] as const) {
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
  // One driver id per saga instance: its claims say which process held an attempt, and which
  // journal its adapter writes to before it acts (so that inspect can prove a start never began).
  const journalId = (options.adapter as Partial<ToolAdapter> | undefined)?.declaration?.journalId;
  const driverId = typeof journalId === 'string' && Identity.is(journalId) && journalId.length <= 48 ? `${sagaId.slice(0, 40)}.${randomUUID()}.${journalId}` : `${sagaId.slice(0, 90)}.${randomUUID()}`;
  const graceMs = decodeOrThrow(GraceMs, 'leaseGraceMs', options.leaseGraceMs ?? 30_000);
  const configured = options.clock ?? Date.now;
  const clock = (): number => decodeOrThrow(BusinessTime, 'clock', configured());
  const telemetry = sagaTelemetry();

  const redaction: RedactionContract = options.redaction ?? { fields: [] };
  const gate = (): { execution: ExecutionAuthority; port: ExecutionPort } => {
    const port = ExecutionAuthority.portOf(execution);
    // R12.1: only openExecution makes an execution authority; a hand-made one is refused.
    if (port === undefined) throw new ExecutionRefusedError('execution_disabled', 'the saga was given no authority opened with openExecution');
    if (!execution!.open) throw new ExecutionRefusedError('ticket_expired', 'the execution authority is closed');
    return { execution: execution!, port };
  };

  /** From a committed start to its outcome fact: the plan opened, the attempt claimed, the ticket minted, the adapter reached. */
  const run = async (execution: ExecutionAuthority, prepared: 'created' | 'existing', barrier: StoredBarrier): Promise<SagaResult> => {
    const authority = execution.authority;
    const startId = barrier.record.startId;
    const base = { prepared, barrier };

    const resolved = async (invoked: boolean): Promise<SagaResult | null> => {
      const known = await authority.recovery.outcome(startId);
      return known === null ? null : { ...base, status: 'already_resolved', invoked, outcome: known };
    };
    const before = await resolved(false);
    if (before !== null) return before;

    // What runs is what was sealed: a shredded plan refuses, a changed one fails closed, before any claim.
    const opened = await execution.openPlan(barrier);
    const adapter = assertMayExecute(true, options.adapter, barrier.record, opened);

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

    // R12.1: what the adapter acts on, minted from a fresh verified read for this attempt only.
    let ticket: ExecutionTicket;
    try {
      ticket = await execution.ticket({ startId, attempt: barrier.record.attempt.startedStepRunVersion, adapter: adapter.declaration.ref });
    } catch (e) {
      // an operator may have decided the attempt since: their fact stands
      const decided = await resolved(false).catch(() => null);
      if (decided !== null) return done(decided);
      await execution.claims.release(claim).catch(() => undefined);
      throw e;
    }

    const record = async (outcome: 'completed' | 'failed', code: AdapterResultCode, report: AdapterReport | InspectReport, invoked: boolean, via: 'start' | 'inspect', output?: ToolOutput): Promise<SagaResult> => {
      try {
        const recorded = await authority.recovery.resolve(startId, outcome, {
          decidedBy: sagaId,
          reason: code,
          requestedAtMs: clock(),
          ...(report.outputDigest === undefined ? {} : { outcomeDigest: report.outputDigest }),
        });
        if (recorded.outcome.outcome !== outcome) return done({ ...base, status: 'already_resolved', invoked, outcome: recorded.outcome });
        return done({ ...base, status: outcome, invoked, via, outcome: recorded.outcome, report, ...(output === undefined ? {} : { output }) });
      } catch (e) {
        // Someone (an operator) may have decided meanwhile; their fact stands, ours is not written.
        const decided = await resolved(invoked).catch(() => null);
        return done(decided ?? { ...base, status: 'in_doubt', invoked, why: 'record_failed', error: describe(e) });
      }
    };

    let step = firstStep(claim, adapter);
    if (step.kind === 'inspect') {
      let inspected: InspectReport;
      let kept: ToolOutput | undefined;
      try {
        const answer = splitAnswer(await adapter.inspect!(ticket, { claims: await execution.claims.history(startId) }));
        inspected = decodeInspectReport(answer.report);
        kept = answer.output;
      } catch {
        inspected = { state: 'unknown' };
      }
      const next = stepAfterInspect(inspected.state, adapter.declaration.guarantees);
      if (next.kind === 'record') return record(next.outcome, next.code, inspected, false, 'inspect', kept);
      step = next;
    }
    if (step.kind === 'in_doubt') return done({ ...base, status: 'in_doubt', invoked: false, why: step.why });

    let report: AdapterReport;
    let output: ToolOutput | undefined;
    try {
      // The output goes back to the caller only; the report (digest and size) is what is recorded.
      const answer = splitAnswer(await telemetry.invoke(adapter, startId, () => adapter.start(ticket, opened)));
      report = decodeAdapterReport(answer.report);
      output = answer.output;
    } catch (e) {
      return done({ ...base, status: 'in_doubt', invoked: true, why: 'start_unknown', error: describe(e) });
    }
    await options.hooks?.afterStart?.(startId);
    return record(report.outcome, report.code, report, true, 'start', output);
  };

  return {
    drive: async (input, plan, invocation) => {
      // The trigger is typed for callers and still decoded here: it may come from a queue or JSON.
      const trigger = decodeToolStepTrigger(input);
      return telemetry.drive(trigger, async () => {
        const { execution, port } = gate();
        const authority = execution.authority;
        const view = await authority.runs.getStepRun(trigger.runId, trigger.stepRunId);
        if (view === null) throw new PreconditionError('step_run_not_found', `StepRun ${trigger.stepRunId} does not exist in Run ${trigger.runId}`);
        const { digest: _digest, ...stepRun } = view;

        const command = buildSagaStartCommand(plan, trigger, stepRun);
        // The gate comes before prepare: a refused execution commits no start to be in doubt about.
        assertMayExecute(true, options.adapter, command, invocation);
        // So do the plan's own checks (size, redaction contract): bad input writes nothing.
        const sealed = port.plans.sealRow(command.startId, command.admission.planDigest, command.contracts.redaction, invocation, redaction);
        clock(); // likewise a clock that cannot stamp the outcome
        // The plan is written in the start's own transaction: a committed start always has its plan.
        const prepared = await port.prepare(command, sealed);
        const barrier = prepared.barrier;
        // A replay of a start committed without the saga (a plain prepare) has none yet: sealed now, before any claim.
        if (prepared.outcome === 'existing' && (await port.plans.status(barrier.record.startId)).status === 'absent') {
          await port.plans.seal(barrier.record.startId, barrier.record.admission.planDigest, barrier.record.contracts.redaction, invocation, redaction);
        }
        await options.hooks?.afterSeal?.(barrier.record.startId);
        return run(execution, prepared.outcome, barrier);
      });
    },
    resume: async (startIdInput) => {
      const startId = decodeOrThrow(Identity, 'startId', startIdInput);
      const { execution, port } = gate();
      const barrier = await port.readBarrier(startId);
      if (barrier === null) throw new PreconditionError('start_not_found', `no start barrier has startId ${startId}`);
      return run(execution, 'existing', barrier);
    },
  };
};
