import { createHash } from 'node:crypto';
import * as t from 'io-ts';
import { canonicalJson } from './canonical';
import { EpochMillis, Identity, Version, decodeOrThrow, literal, strictObject } from './codecs';
import { ApprovalBinding, type ToolExecutionStartCommand } from './command';
import { PreconditionError } from './errors';
import { stepRunDigest, type StepRunState } from './state';

// The orchestration saga (process manager) that embeds the barrier, pure part: its input
// message, the start command it builds, its decisions, and its ports. The sequencing over an
// authority lives in `application/saga.ts`; nothing here does I/O.
//
// One Tool StepRun, one attempt:  ready (or approval granted) -> build the start command ->
// prepare -> claim the attempt (one driver) -> invoke the adapter, or inspect first when an
// earlier driver may have invoked (domain/adapter.ts) -> record the outcome fact. A replayed
// trigger rebuilds the identical command (ids derive from the attempt, time from the trigger),
// so `prepare` answers `existing` (R4.2) and the recorded outcome stops a second invocation.

/** The message that starts the saga for one attempt: the StepRun became startable. */
export const ToolStepTrigger = t.union([
  strictObject('StepRunReadyTrigger', {
    kind: literal('ready'),
    runId: Identity,
    stepRunId: Identity,
    /** The StepRun version the `ready` move produced. */
    stepRunVersion: Version,
    /** Business time of the trigger; it becomes the command's `requestedAtMs`. */
    requestedAtMs: EpochMillis,
  }),
  strictObject('ApprovalGrantedTrigger', {
    kind: literal('approval_granted'),
    runId: Identity,
    stepRunId: Identity,
    stepRunVersion: Version,
    requestedAtMs: EpochMillis,
    /** The exact approval the StepRun waits on (R1.4.4). */
    approval: ApprovalBinding,
  }),
]);
export type ToolStepTrigger = t.TypeOf<typeof ToolStepTrigger>;

export const decodeToolStepTrigger = (input: unknown): ToolStepTrigger => decodeOrThrow(ToolStepTrigger, 'saga trigger', input);

/**
 * What orchestration admitted for this tool call (R1.4.1-R1.4.3): everything of the start
 * command that is not the attempt's own identity. Validated with the whole command by
 * `prepare`, the one boundary.
 */
export type StartPlan = Pick<ToolExecutionStartCommand, 'project' | 'toolDefinition' | 'handlerBinding' | 'admission' | 'contracts'>;

const ATTEMPT_ID_TAG = 'qinglong/saga-attempt-ids@v1';

/**
 * Deterministic identities of one attempt: the same (Run, StepRun, started version) always
 * yields the same ids, so a replayed saga step is an exact replay, and another attempt can
 * never reuse them (R4.1, R4.4).
 */
export const attemptIdsOf = (runId: string, stepRunId: string, startedStepRunVersion: number) => {
  const h = createHash('sha256').update(ATTEMPT_ID_TAG, 'utf8').update('\u0000').update(canonicalJson([runId, stepRunId, startedStepRunVersion]), 'utf8').digest('hex').slice(0, 40);
  return {
    startId: `start-${h}`,
    traceId: `trace-${h}`,
    spanId: `span-${h}`,
    auditEventId: `audit-${h}`,
    auditReceiptId: `receipt-${h}`,
    mutationId: `mutation-${h}`,
    runEventId: `run-event-${h}`,
  };
};

/**
 * The start command for the trigger's attempt. The expected StepRun digest is the StepRun as
 * it stood when the trigger fired (status and version from the trigger, the stable fields from
 * the StepRun read now), so a replay long after the start still rebuilds the same command.
 */
export const buildSagaStartCommand = (plan: StartPlan, trigger: ToolStepTrigger, stepRun: StepRunState): ToolExecutionStartCommand => {
  if (stepRun.runId !== trigger.runId || stepRun.stepRunId !== trigger.stepRunId) {
    throw new PreconditionError('step_run_not_found', `the trigger names ${trigger.runId}/${trigger.stepRunId}, not ${stepRun.runId}/${stepRun.stepRunId}`);
  }
  const fromStatus = trigger.kind === 'ready' ? 'ready' : 'waiting_approval';
  const { lastStartId: _attempt, approval: _current, ...stable } = stepRun;
  const asTriggered: StepRunState = {
    ...stable,
    status: fromStatus,
    version: trigger.stepRunVersion,
    ...(trigger.kind === 'approval_granted' ? { approval: trigger.approval } : {}),
  };
  const ids = attemptIdsOf(trigger.runId, trigger.stepRunId, trigger.stepRunVersion + 1);
  return {
    schema: 'qinglong/tool-execution-start-command@v1',
    startId: ids.startId,
    requestedAtMs: trigger.requestedAtMs,
    project: plan.project,
    toolDefinition: plan.toolDefinition,
    handlerBinding: plan.handlerBinding,
    admission: plan.admission,
    contracts: plan.contracts,
    stepRun: { runId: trigger.runId, stepRunId: trigger.stepRunId, kind: 'tool', expectedVersion: trigger.stepRunVersion, expectedDigest: stepRunDigest(asTriggered) },
    evidence: { traceId: ids.traceId, spanId: ids.spanId, auditEventId: ids.auditEventId, auditReceiptId: ids.auditReceiptId },
    mutation: { mutationId: ids.mutationId, runEventId: ids.runEventId, fromStatus, toStatus: 'running' },
    ...(trigger.kind === 'approval_granted' ? { approval: trigger.approval } : {}),
  };
};
