import { randomUUID } from 'node:crypto';
import { digestOf, RECORD_TAGS } from './canonical';
import type { ApprovalBinding, ToolExecutionStartCommand } from './command';
import type { LifecycleCommand } from './lifecycle';
import { stepRunDigest, type StepRunState } from './state';

// A complete, valid scenario: the lifecycle commands that make a ready (or approval-bound)
// Tool StepRun, and the start command for it. Used by `npm start`, the CLI's `example`, the
// specs and the benchmarks, so every one of them exercises the same shape.

const fakeDigest = (label: string): string => digestOf(RECORD_TAGS.command, { label });

export interface ScenarioOptions {
  /** Prefix for every id (default: a fresh UUID, so each call is new). */
  readonly prefix?: string;
  readonly projectId?: string;
  readonly runId?: string;
  readonly stepRunId?: string;
  readonly withApproval?: boolean;
  readonly requestedAtMs?: number;
}

export interface Scenario {
  readonly runId: string;
  readonly stepRunId: string;
  readonly projectId: string;
  readonly lifecycle: LifecycleCommand[];
  /** The StepRun as it stands after `lifecycle`, so a start command can name its digest. */
  readonly stepRun: StepRunState;
  readonly approval?: ApprovalBinding;
  /** A start command for attempt `stepRun.version + 1`; `attempt` varies the ids per attempt. */
  readonly startCommand: (stepRun?: StepRunState, attempt?: string) => ToolExecutionStartCommand;
}

export const buildScenario = (options: ScenarioOptions = {}): Scenario => {
  const p = options.prefix ?? randomUUID();
  const at = options.requestedAtMs ?? 1_780_000_000_000;
  const projectId = options.projectId ?? `project-${p}`;
  const runId = options.runId ?? `run-${p}`;
  const stepRunId = options.stepRunId ?? `step-${p}`;
  const toolDefinition = { id: `tool-def-${p}`, digest: fakeDigest(`definition ${p}`) };
  const approval: ApprovalBinding | undefined = options.withApproval
    ? { approvalRequestId: `approval-${p}`, dispatchId: `dispatch-${p}`, approvalDigest: fakeDigest(`approval ${p}`) }
    : undefined;

  const lifecycle: LifecycleCommand[] = [
    { type: 'CreateRun', data: { runId, projectId, snapshotId: `snapshot-${p}`, snapshotDigest: fakeDigest(`snapshot ${p}`), requestedAtMs: at } },
    { type: 'CreateStepRun', data: { runId, stepRunId, kind: 'tool', toolDefinition, requestedAtMs: at } },
    approval
      ? { type: 'AwaitStepRunApproval', data: { runId, stepRunId, approval, requestedAtMs: at } }
      : { type: 'MarkStepRunReady', data: { runId, stepRunId, requestedAtMs: at } },
  ];
  const stepRun: StepRunState = {
    runId,
    stepRunId,
    projectId,
    kind: 'tool',
    toolDefinition,
    status: approval ? 'waiting_approval' : 'ready',
    version: 2,
    ...(approval ? { approval } : {}),
  };

  const startCommand = (current: StepRunState = stepRun, attempt = `v${current.version + 1}`): ToolExecutionStartCommand => {
    const a = `${p}-${attempt}`;
    const fromStatus = current.status === 'waiting_approval' ? 'waiting_approval' : 'ready';
    return {
      schema: 'qinglong/tool-execution-start-command@v1',
      startId: `start-${a}`,
      requestedAtMs: at,
      project: { projectId, snapshotId: `snapshot-${p}`, snapshotDigest: fakeDigest(`snapshot ${p}`) },
      toolDefinition,
      handlerBinding: { id: `handler-binding-${p}`, digest: fakeDigest(`handler ${p}`) },
      admission: {
        actionDigest: fakeDigest(`action ${p}`),
        planDigest: fakeDigest(`plan ${p}`),
        admissionDigest: fakeDigest(`admission ${p}`),
        profile: 'standard',
        executionClass: 'process',
        timeoutMs: 30_000,
        policyFence: { policyId: `policy-${p}`, policyVersion: 7, policyDigest: fakeDigest(`policy ${p}`) },
      },
      contracts: {
        adapter: { id: 'adapter.process.v3', digest: fakeDigest('adapter process v3') },
        redaction: { id: 'redaction.default.v2', digest: fakeDigest('redaction v2') },
        audit: { id: 'audit.start.v1', digest: fakeDigest('audit v1') },
      },
      stepRun: { runId, stepRunId, kind: 'tool', expectedVersion: current.version, expectedDigest: stepRunDigest(current) },
      evidence: { traceId: `trace-${a}`, spanId: `span-${a}`, auditEventId: `audit-${a}`, auditReceiptId: `receipt-${a}` },
      mutation: { mutationId: `mutation-${a}`, runEventId: `run-event-${a}`, fromStatus, toStatus: 'running' },
      ...(fromStatus === 'waiting_approval' && current.approval ? { approval: current.approval } : {}),
    };
  };

  return { runId, stepRunId, projectId, lifecycle, stepRun, ...(approval ? { approval } : {}), startCommand };
};
