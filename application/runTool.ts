import { setTimeout as sleep } from 'node:timers/promises';
import { PreconditionError, ValidationError, splitAnswer, type DriverClaim, type ToolAdapter, type ToolOutput } from '../domain';
import { Identity, decodeOrThrow, integer } from '../domain/codecs';
import type { InDoubtQuery, RecoverableStartBarrierAuthority, StartOutcome } from './authority';
import { ExecutionAuthority, inspectionTicket, type ExecutionPort } from './execution';
import { createToolStepSaga, type InDoubtWhy, type SagaResult, type ToolStepSaga } from './toolStepSaga';
import { checkedCall, conflictOn, differingFields, type CheckedCall, type RunToolCall, type Tool } from './runToolPlan';
import { ExecutionRefusedError } from '../domain';
import type { RedactionContract } from './invocationPlans';

// One call for one tool call (R11, R12): the Run and the StepRun made if absent, the start
// derived, prepared and sealed, the adapter driven through the saga, the outcome recorded and
// the output returned. Everything it needs again after a crash is stored: the ready move's
// version and time (so a re-call builds the identical start command), the sealed input, the
// claims. A re-call with the same arguments settles the same attempt; `recover()` settles
// every start in doubt from what is stored alone.

export type { Tool, RunToolCall } from './runToolPlan';

export interface RunToolOptions {
  /** Recorded as `decidedBy` on the outcomes it records (default `run-tool`). */
  readonly sagaId?: string;
  /**
   * Wait out another driver's live claim on the attempt, then settle it (default true). A
   * claim's lease ends by the barrier's timeout plus `leaseGraceMs`; false reports it instead.
   */
  readonly waitForClaims?: boolean;
  /** Added to the barrier's timeout for a claim's lease (default 30 s). */
  readonly leaseGraceMs?: number;
  /**
   * What operators may see of the input (R12.2): the input fields its sealed plan's preview
   * shows, e.g. `{ fields: ['day'] }`; every other field is never shown (default: none). Part
   * of the command: the same call id with another allowlist is SEMANTIC_CONFLICT.
   */
  readonly redaction?: RedactionContract;
}

export interface RunToolResult {
  /** `in_doubt`: nobody can say whether the tool acted; `recover()` or an operator settles it. */
  readonly status: 'completed' | 'failed' | 'lost' | 'in_doubt';
  readonly runId: string;
  readonly callId: string;
  readonly startId: string;
  /** Whether this call reached the tool's `start`. */
  readonly invoked: boolean;
  /** The tool's output (bounded: 1 MiB of text, 64 KiB of stderr), or null with `outputGone` saying why. */
  readonly output: ToolOutput | null;
  readonly outputGone?: string;
  readonly outcome?: StartOutcome;
  readonly why?: InDoubtWhy | 'claimed_elsewhere';
  /** In doubt because another driver holds the attempt: its claim, and when its lease ends (database clock). */
  readonly holder?: DriverClaim;
}

const GraceMs = integer('LeaseGraceMs', 0, 300_000);
const MAX_CLAIM_WAITS = 5;

const gateOf = (execution: unknown): { execution: ExecutionAuthority; port: ExecutionPort } => {
  const port = ExecutionAuthority.portOf(execution);
  if (port === undefined) throw new ExecutionRefusedError('execution_disabled', 'runTool takes an execution authority made by openExecution');
  if (!(execution as ExecutionAuthority).open) throw new ExecutionRefusedError('ticket_expired', 'the execution authority is closed');
  return { execution: execution as ExecutionAuthority, port };
};

/** `redaction` only where a plan is sealed (runTool): a re-drive opens the stored plan, whose preview was fixed when it was sealed. */
const sagaOf = (execution: ExecutionAuthority, adapter: ToolAdapter, options: Pick<RunToolOptions, 'sagaId' | 'leaseGraceMs'>, redaction?: RedactionContract): ToolStepSaga =>
  createToolStepSaga({
    execution,
    adapter,
    sagaId: decodeOrThrow(Identity, 'sagaId', options.sagaId ?? 'run-tool'),
    leaseGraceMs: decodeOrThrow(GraceMs, 'leaseGraceMs', options.leaseGraceMs ?? 30_000),
    ...(redaction === undefined ? {} : { redaction }),
  });

/** Until another driver's lease has run out: a lease is never renewed, so the wait ends. */
export const waitOutLease = (holder: { readonly leaseUntilMs: number }): Promise<void> => sleep(Math.max(0, holder.leaseUntilMs - Date.now()) + 50);

/** Resume while another driver's lease lives, if asked. */
const waitingOutClaims = async (saga: ToolStepSaga, first: SagaResult, wait: boolean): Promise<SagaResult> => {
  let result = first;
  for (let i = 0; wait && result.status === 'claimed_elsewhere' && i < MAX_CLAIM_WAITS; i++) {
    await waitOutLease(result.holder);
    result = await saga.resume(result.barrier.record.startId);
  }
  return result;
};

const GONE = 'the tool finished before this call (an earlier process or call ran it); its adapter cannot give the output back';

/** What an adapter can still give of a finished start's output (its status endpoint), or why not. */
const outputAfter = async (execution: ExecutionAuthority, adapter: ToolAdapter, startId: string): Promise<{ output: ToolOutput | null; outputGone?: string }> => {
  if (adapter.inspect === undefined) return { output: null, outputGone: `${GONE} (it has no inspect)` };
  try {
    const ticket = await inspectionTicket(execution.authority, startId);
    const answer = splitAnswer(await adapter.inspect(ticket, { claims: await execution.claims.history(startId) }));
    if (answer.output !== undefined) return { output: answer.output };
  } catch {
    // an unreachable status endpoint: the output is gone for this call
  }
  return { output: null, outputGone: `${GONE} (a process journal keeps exit statuses only; an HTTP status endpoint may answer "output")` };
};

/** A saga result as the caller of runTool or recover sees it. */
const settled = async (execution: ExecutionAuthority, adapter: ToolAdapter, result: SagaResult, ids: { runId: string; callId: string }): Promise<RunToolResult> => {
  const base = { ...ids, startId: result.barrier.record.startId, invoked: result.invoked };
  switch (result.status) {
    case 'completed':
    case 'failed':
      if (result.output !== undefined) return { ...base, status: result.status, outcome: result.outcome, output: result.output };
      return { ...base, status: result.status, outcome: result.outcome, ...(await outputAfter(execution, adapter, base.startId)) };
    case 'already_resolved': {
      const status = result.outcome.outcome;
      if (status === 'lost') return { ...base, status, outcome: result.outcome, output: null, outputGone: 'the attempt was resolved as lost: the tool may not have run' };
      return { ...base, status, outcome: result.outcome, ...(await outputAfter(execution, adapter, base.startId)) };
    }
    case 'claimed_elsewhere':
      return { ...base, status: 'in_doubt', why: 'claimed_elsewhere', holder: result.holder, output: null, outputGone: 'another driver holds the attempt' };
    case 'in_doubt':
      return { ...base, status: 'in_doubt', why: result.why, output: null, outputGone: 'whether the tool acted is unknown' };
  }
};

/** What another call of the same call id racing this one makes a lifecycle move answer: the move is done, decide again from what is stored. */
const RACED: ReadonlySet<string> = new Set(['run_exists', 'step_run_exists', 'version_mismatch']);

/**
 * The Run and the StepRun, made ready if absent. Each move is decided on what is stored, so a
 * re-call writes nothing; a call racing this one (its first moves committed between our read and
 * our write) makes the move a precondition that names it done, and the decision is taken again
 * on a fresh read: each lost race is one move (of three) the other call made, so four rounds suffice.
 */
const readyStepRun = async (authority: RecoverableStartBarrierAuthority, c: CheckedCall): Promise<{ stepRunVersion: number; requestedAtMs: number }> => {
  for (let round = 1; ; round += 1) {
    try {
      return await readyStepRunOnce(authority, c);
    } catch (error) {
      if (round >= 4 || !(error instanceof PreconditionError) || !RACED.has(error.reason)) throw error;
    }
  }
};

const readyStepRunOnce = async (authority: RecoverableStartBarrierAuthority, c: CheckedCall): Promise<{ stepRunVersion: number; requestedAtMs: number }> => {
  const { runId, callId, plan } = c;
  const created = (await authority.runs.readStream(runId)).find((e) => e.event.type === 'RunCreated')?.event;
  if (created?.type === 'RunCreated' && created.data.projectId !== plan.project.projectId) throw conflictOn(callId, undefined, ['projectId']);
  const step = await authority.runs.getStepRun(runId, callId);
  if (step !== null) {
    if (step.kind !== 'tool' || step.toolDefinition?.id !== plan.toolDefinition.id || step.toolDefinition.digest !== plan.toolDefinition.digest) throw conflictOn(callId, step.lastStartId, ['tool.definition']);
    const barrier = step.lastStartId === undefined ? null : await authority.barriers.getByStartId(step.lastStartId);
    if (barrier !== null) {
      const fields = differingFields(plan, barrier.record);
      if (fields.length > 0) throw conflictOn(callId, barrier.record.startId, fields);
    }
    if (step.status === 'waiting_approval') throw new PreconditionError('invalid_transition', `StepRun ${callId} waits for an approval: drive it with createToolStepSaga`);
  }
  const now = Date.now();
  if (created === undefined) await authority.runs.handle({ type: 'CreateRun', data: { runId, ...plan.project, requestedAtMs: now } });
  if (step === null) await authority.runs.handle({ type: 'CreateStepRun', data: { runId, stepRunId: callId, kind: 'tool', toolDefinition: plan.toolDefinition, requestedAtMs: now } });
  if (step === null || step.status === 'created') {
    await authority.runs.handle({ type: 'MarkStepRunReady', data: { runId, stepRunId: callId, requestedAtMs: now, expectedStepRunVersion: step?.version ?? 1 } });
  }
  // The start's time is the ready move's, as stored: every re-call builds the identical command.
  const events = await authority.runs.readStream(runId);
  const ready = events.map((e) => e.event).filter((e) => e.type === 'StepRunReady' && e.data.stepRunId === callId).pop();
  if (ready?.type !== 'StepRunReady') throw new PreconditionError('invalid_transition', `StepRun ${callId} was never made ready`);
  return { stepRunVersion: ready.data.stepRunVersion, requestedAtMs: ready.data.occurredAtMs };
};

/**
 * Run one tool call, or settle it after a crash or a lost response: the same arguments always
 * name the same attempt. Returns the tool's output (bounded), never records it. A bad call
 * (no tool, an input over the plan limit, an id outside the id alphabet) is VALIDATION_FAILED
 * naming the field, and a call id reused with other arguments SEMANTIC_CONFLICT naming the
 * fields that differ: nothing written, no side effect. An attempt resolved `lost` is returned
 * as `lost` (a retry is a new call id, or MarkStepRunReady with the lower-level API).
 */
export const runTool = async (execution: ExecutionAuthority, call: RunToolCall, options: RunToolOptions = {}): Promise<RunToolResult> => {
  const { execution: gated, port } = gateOf(execution);
  const c = checkedCall(call, port, options.redaction);
  const saga = sagaOf(gated, c.adapter, options, c.redaction);
  const ready = await readyStepRun(gated.authority, c);
  const trigger = { kind: 'ready' as const, runId: c.runId, stepRunId: c.callId, ...ready };
  const result = await waitingOutClaims(saga, await saga.drive(trigger, c.plan, c.invocation), options.waitForClaims ?? true);
  return settled(gated, c.adapter, result, { runId: c.runId, callId: c.callId });
};

export interface RecoverOptions extends RunToolOptions {
  /** The tools this runtime runs: a start is re-driven by the tool whose adapter its barrier names. */
  readonly tools: readonly Tool[];
  /** Only this runtime's starts: its project, or one Run (default: every start in doubt). */
  readonly projectId?: string;
  readonly runId?: string;
  /** At most this many starts, the oldest first (default 1000). */
  readonly limit?: number;
}

export type RecoveredStart = RunToolResult | { readonly status: 'no_tool'; readonly runId: string; readonly callId: string; readonly startId: string; readonly adapter: string };

export interface RecoverReport {
  /** Starts that now have their outcome. */
  readonly settled: number;
  /** Starts still in doubt (unknowable, a live claim not waited out, or no tool for their adapter). */
  readonly inDoubt: number;
  readonly starts: readonly RecoveredStart[];
}

/**
 * Settle what is in doubt: each start re-driven from its sealed plan (saga.resume), which
 * inspects first when an earlier driver may have invoked, records what the tool's side knows,
 * invokes only where it provably never started (or starts are idempotent), and otherwise
 * leaves the start in doubt for an operator. Live claims are waited out (or reported with
 * `waitForClaims: false`).
 */
export const recover = async (execution: ExecutionAuthority, options: RecoverOptions): Promise<RecoverReport> => {
  const { execution: gated } = gateOf(execution);
  if (!Array.isArray(options?.tools)) throw new ValidationError('recover options', [{ path: 'tools', reason: 'invalid_value', message: 'recover needs the tools this runtime runs: { tools: [...] }' }]);
  const query: InDoubtQuery = { limit: options.limit ?? 1000, ...(options.projectId === undefined ? {} : { projectId: options.projectId }), ...(options.runId === undefined ? {} : { runId: options.runId }) };
  const starts: RecoveredStart[] = [];
  for (const s of await gated.authority.recovery.inDoubt(query)) {
    const ids = { runId: s.runId, callId: s.stepRunId };
    const tool = options.tools.find((t) => t?.adapter?.declaration?.ref?.id === s.adapter.id && t.adapter.declaration.ref.digest === s.adapter.digest);
    if (tool === undefined) {
      starts.push({ status: 'no_tool', ...ids, startId: s.startId, adapter: s.adapter.id });
      continue;
    }
    const saga = sagaOf(gated, tool.adapter, options);
    const result = await waitingOutClaims(saga, await saga.resume(s.startId), options.waitForClaims ?? true);
    starts.push(await settled(gated, tool.adapter, result, ids));
  }
  const open = starts.filter((s) => s.status === 'in_doubt' || s.status === 'no_tool').length;
  return { settled: starts.length - open, inDoubt: open, starts };
};
