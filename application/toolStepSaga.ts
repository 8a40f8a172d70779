import { randomUUID } from 'node:crypto';
import {
  ExecutionRefusedError,
  PreconditionError,
  assertMayExecute,
  buildSagaStartCommand,
  decodeToolStepTrigger,
  type InvocationPlan,
  type StartPlan,
  type ToolStepTrigger,
  type ToolAdapter,
  ValidationError,
} from '../domain';
import { Identity, decodeOrThrow, integer } from '../domain/codecs';
import { CLAIM_LEASE_GRACE_MS } from './driverClaimRules';
import { ExecutionAuthority, refuseUnknown, type ExecutionPort } from './execution';
import type { RedactionContract } from './invocationPlans';
import { runAttempt, type AttemptContext } from './sagaAttempt';
import type { SagaResult } from './sagaResult';
import { sagaTelemetry } from './telemetry';

export type { InDoubtWhy, SagaResult } from './sagaResult';

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
  const attempt: AttemptContext = { options, sagaId, driverId, graceMs, clock, telemetry };

  const redaction: RedactionContract = options.redaction ?? { fields: [] };
  const gate = (): { execution: ExecutionAuthority; port: ExecutionPort } => {
    const port = ExecutionAuthority.portOf(execution);
    // R12.1: only openExecution makes an execution authority; a hand-made one is refused.
    if (port === undefined) throw new ExecutionRefusedError('execution_disabled', 'the saga was given no authority opened with openExecution');
    if (!execution!.open) throw new ExecutionRefusedError('ticket_expired', 'the execution authority is closed');
    return { execution: execution!, port };
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
        return runAttempt(attempt, execution, prepared.outcome, barrier);
      });
    },
    resume: async (startIdInput) => {
      const startId = decodeOrThrow(Identity, 'startId', startIdInput);
      const { execution, port } = gate();
      const barrier = await port.readBarrier(startId);
      if (barrier === null) throw new PreconditionError('start_not_found', `no start barrier has startId ${startId}`);
      return runAttempt(attempt, execution, 'existing', barrier);
    },
  };
};
