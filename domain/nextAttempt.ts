import type { StartBarrierRecord } from './barrier';
import type { ToolExecutionStartCommand } from './command';
import { PreconditionError } from './errors';
import { attemptIdsOf, type StartPlan } from './saga';
import type { StepRunState } from './state';

// The start command for a StepRun's next attempt, built from what is stored instead of by
// hand: after `lost -> ready` every id, the expected version and the expected digest change
// (R4.4), and editing seven ids and a digest by hand is how an operator gets one wrong.

/** What orchestration admitted, as a committed barrier recorded it: the plan of a retry. */
export const planOfBarrier = (record: StartBarrierRecord): StartPlan => ({
  project: { projectId: record.projectId, snapshotId: record.snapshotId, snapshotDigest: record.snapshotDigest },
  toolDefinition: record.toolDefinition,
  handlerBinding: record.handlerBinding,
  admission: record.admission,
  contracts: record.contracts,
});

/**
 * The start command for the next attempt of a startable StepRun (`ready`, or
 * `waiting_approval` with its approval), given the StepRun as `runs.getStepRun` returns it
 * (with its digest). The ids derive from (Run, StepRun, attempt) as the saga's do, so building
 * it twice gives the same command and `prepare` replays instead of starting twice.
 */
export const nextStartCommand = (
  plan: StartPlan,
  stepRun: StepRunState & { readonly digest: string },
  requestedAtMs: number,
  /** `traceparent`: the caller's W3C trace context, kept in the trace anchor. */
  options: { readonly traceparent?: string } = {},
): ToolExecutionStartCommand => {
  if (stepRun.status !== 'ready' && stepRun.status !== 'waiting_approval') {
    throw new PreconditionError(
      'status_mismatch',
      `StepRun ${stepRun.stepRunId} is ${stepRun.status}; only a ready (or approval-waiting) StepRun can start an attempt (after lost: MarkStepRunReady first)`,
      ['ready', 'waiting_approval'],
      stepRun.status,
    );
  }
  const ids = attemptIdsOf(stepRun.runId, stepRun.stepRunId, stepRun.version + 1);
  return {
    schema: 'qinglong/tool-execution-start-command@v1',
    startId: ids.startId,
    requestedAtMs,
    project: plan.project,
    toolDefinition: plan.toolDefinition,
    handlerBinding: plan.handlerBinding,
    admission: plan.admission,
    contracts: plan.contracts,
    stepRun: { runId: stepRun.runId, stepRunId: stepRun.stepRunId, kind: 'tool', expectedVersion: stepRun.version, expectedDigest: stepRun.digest },
    evidence: {
      traceId: ids.traceId,
      spanId: ids.spanId,
      auditEventId: ids.auditEventId,
      auditReceiptId: ids.auditReceiptId,
      ...(options.traceparent === undefined ? {} : { traceparent: options.traceparent }),
    },
    mutation: { mutationId: ids.mutationId, runEventId: ids.runEventId, fromStatus: stepRun.status, toStatus: 'running' },
    ...(stepRun.status === 'waiting_approval' && stepRun.approval !== undefined ? { approval: stepRun.approval } : {}),
  };
};
