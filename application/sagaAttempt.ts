import {
  assertMayExecute,
  decodeAdapterReport,
  decodeInspectReport,
  firstStep,
  isStartBarrierError,
  leaseMsOf,
  splitAnswer,
  stepAfterInspect,
  type AdapterReport,
  type AdapterResultCode,
  type DriverClaim,
  type DriverStep,
  type ExecutionTicket,
  type InspectReport,
  type ToolAdapter,
  type ToolOutput,
} from '../domain';
import type { StoredBarrier } from '../domain/records';
import type { ExecutionAuthority } from './execution';
import type { OpenedPlan } from './invocationPlans';
import type { SagaTelemetry } from './telemetry';
import type { SagaBase, SagaResult } from './sagaResult';

export type { InDoubtWhy, SagaResult } from './sagaResult';

// One attempt of the orchestration saga, from a committed start to its outcome fact (R3.8,
// R11.2): the plan opened, the attempt claimed, the ticket minted, the adapter reached (or
// inspected first by a driver that takes over). Every way out releases the claim.

/** What an attempt needs of the saga that drives it, fixed when the saga is made. */
export interface AttemptContext {
  /** The saga's options as given: the adapter and the fault hooks are read when used. */
  readonly options: { readonly adapter: ToolAdapter; readonly hooks?: { readonly afterStart?: (startId: string) => void | Promise<void> } };
  readonly sagaId: string;
  readonly driverId: string;
  readonly graceMs: number;
  readonly clock: () => number;
  readonly telemetry: SagaTelemetry;
}

/** An attempt this driver holds the claim of, with its ticket: only it reaches the adapter. */
interface ClaimedAttempt {
  readonly ctx: AttemptContext;
  readonly execution: ExecutionAuthority;
  readonly base: SagaBase;
  readonly startId: string;
  readonly adapter: ToolAdapter;
  readonly opened: OpenedPlan;
  readonly claim: DriverClaim;
  readonly ticket: ExecutionTicket;
  /** Ends this claim's generation, whatever happened: the next driver inspects first. */
  readonly done: (result: SagaResult) => Promise<SagaResult>;
}

const describe = (e: unknown): { code?: string; message: string } =>
  isStartBarrierError(e) ? { code: e.code, message: e.message } : { message: e instanceof Error ? e.message : String(e) };

/** The attempt's outcome fact as a result, or null while it has none. */
const resolvedOf = async (execution: ExecutionAuthority, base: SagaBase, invoked: boolean): Promise<SagaResult | null> => {
  const known = await execution.authority.recovery.outcome(base.barrier.record.startId);
  return known === null ? null : { ...base, status: 'already_resolved', invoked, outcome: known };
};

/** The outcome as a fact, unless someone (an operator) decided first: their fact stands. */
const recordOutcome = async (
  a: ClaimedAttempt,
  outcome: 'completed' | 'failed',
  code: AdapterResultCode,
  report: AdapterReport | InspectReport,
  invoked: boolean,
  via: 'start' | 'inspect',
  output?: ToolOutput,
): Promise<SagaResult> => {
  const { base } = a;
  try {
    const recorded = await a.execution.authority.recovery.resolve(a.startId, outcome, {
      decidedBy: a.ctx.sagaId,
      reason: code,
      requestedAtMs: a.ctx.clock(),
      ...(report.outputDigest === undefined ? {} : { outcomeDigest: report.outputDigest }),
    });
    if (recorded.outcome.outcome !== outcome) return a.done({ ...base, status: 'already_resolved', invoked, outcome: recorded.outcome });
    return a.done({ ...base, status: outcome, invoked, via, outcome: recorded.outcome, report, ...(output === undefined ? {} : { output }) });
  } catch (e) {
    // Someone (an operator) may have decided meanwhile; their fact stands, ours is not written.
    const decided = await resolvedOf(a.execution, base, invoked).catch(() => null);
    return a.done(decided ?? { ...base, status: 'in_doubt', invoked, why: 'record_failed', error: describe(e) });
  }
};

/** A driver that takes over asks the tool's side first: a known outcome is recorded, else it invokes or stops. */
const inspectFirst = async (a: ClaimedAttempt): Promise<SagaResult | DriverStep> => {
  let inspected: InspectReport;
  let kept: ToolOutput | undefined;
  try {
    const answer = splitAnswer(await a.adapter.inspect!(a.ticket, { claims: await a.execution.claims.history(a.startId) }));
    inspected = decodeInspectReport(answer.report);
    kept = answer.output;
  } catch {
    inspected = { state: 'unknown' };
  }
  const next = stepAfterInspect(inspected.state, a.adapter.declaration.guarantees);
  return next.kind === 'record' ? recordOutcome(a, next.outcome, next.code, inspected, false, 'inspect', kept) : next;
};

/** The adapter reached: its answer is recorded, a throw or timeout leaves the attempt in doubt. */
const startTool = async (a: ClaimedAttempt): Promise<SagaResult> => {
  let report: AdapterReport;
  let output: ToolOutput | undefined;
  try {
    // The output goes back to the caller only; the report (digest and size) is what is recorded.
    const answer = splitAnswer(await a.ctx.telemetry.invoke(a.adapter, a.startId, () => a.adapter.start(a.ticket, a.opened)));
    report = decodeAdapterReport(answer.report);
    output = answer.output;
  } catch (e) {
    return a.done({ ...a.base, status: 'in_doubt', invoked: true, why: 'start_unknown', error: describe(e) });
  }
  await a.ctx.options.hooks?.afterStart?.(a.startId);
  return recordOutcome(a, report.outcome, report.code, report, true, 'start', output);
};

/** The claimed attempt's next steps: inspect when an earlier driver may have invoked, then start or stop in doubt. */
const driveClaimed = async (a: ClaimedAttempt): Promise<SagaResult> => {
  let step = firstStep(a.claim, a.adapter);
  if (step.kind === 'inspect') {
    const next = await inspectFirst(a);
    if (!('kind' in next)) return next;
    step = next;
  }
  if (step.kind === 'in_doubt') return a.done({ ...a.base, status: 'in_doubt', invoked: false, why: step.why });
  return startTool(a);
};

/** From a committed start to its outcome fact. */
export const runAttempt = async (ctx: AttemptContext, execution: ExecutionAuthority, prepared: 'created' | 'existing', barrier: StoredBarrier): Promise<SagaResult> => {
  const startId = barrier.record.startId;
  const base = { prepared, barrier };
  const before = await resolvedOf(execution, base, false);
  if (before !== null) return before;

  // What runs is what was sealed: a shredded plan refuses, a changed one fails closed, before any claim.
  const opened = await execution.openPlan(barrier);
  const adapter = assertMayExecute(true, ctx.options.adapter, barrier.record, opened);

  const claimed = await execution.claims.claim(startId, ctx.driverId, leaseMsOf(barrier.record.admission.timeoutMs, ctx.graceMs));
  if (claimed.status === 'held') return { ...base, status: 'claimed_elsewhere', invoked: false, holder: claimed.holder };
  const claim = claimed.claim;
  const done = async (result: SagaResult): Promise<SagaResult> => {
    await execution.claims.release(claim).catch(() => undefined);
    return result;
  };

  // An earlier driver may have recorded the outcome between our read and our claim.
  const meanwhile = await resolvedOf(execution, base, false);
  if (meanwhile !== null) return done(meanwhile);

  // R12.1: what the adapter acts on, minted from a fresh verified read for this attempt only.
  let ticket: ExecutionTicket;
  try {
    ticket = await execution.ticket({ startId, attempt: barrier.record.attempt.startedStepRunVersion, adapter: adapter.declaration.ref });
  } catch (e) {
    // an operator may have decided the attempt since: their fact stands
    const decided = await resolvedOf(execution, base, false).catch(() => null);
    if (decided !== null) return done(decided);
    await execution.claims.release(claim).catch(() => undefined);
    throw e;
  }
  return driveClaimed({ ctx, execution, base, startId, adapter, opened, claim, ticket, done });
};
