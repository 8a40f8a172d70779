import { invocationPlanDigest, type InvocationPlan, type StartPlan, type ToolStepTrigger } from '../../domain';
import type { Ref } from '../../domain/codecs';
import { buildScenario, type Scenario } from '../../domain/scenario';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';

// One tool call as orchestration would admit it: a StepRun made ready, the plan admission
// reviewed (its planDigest binds the tool input, its execution class and reviewed adapter name
// the adapter), the trigger, and the input held in memory only.

export interface ToolCall {
  readonly scenario: Scenario;
  readonly trigger: ToolStepTrigger;
  readonly plan: StartPlan;
  readonly invocation: InvocationPlan;
}

export const ADAPTER_REFS = {
  process: { id: 'adapter-process', digest: `sha256:${'1'.repeat(64)}` },
  http: { id: 'adapter-http', digest: `sha256:${'2'.repeat(64)}` },
  mcp: { id: 'adapter-mcp', digest: `sha256:${'3'.repeat(64)}` },
} as const satisfies Record<string, Ref>;

export const readyToolCall = async (
  authority: RecoverableStartBarrierAuthority,
  kind: keyof typeof ADAPTER_REFS,
  input: unknown,
  timeoutMs: number,
): Promise<ToolCall> => {
  const scenario = buildScenario();
  for (const c of scenario.lifecycle) await authority.runs.handle(c);
  const command = scenario.startCommand();
  const invocation: InvocationPlan = { input };
  const plan: StartPlan = {
    project: command.project,
    toolDefinition: command.toolDefinition,
    handlerBinding: command.handlerBinding,
    admission: { ...command.admission, executionClass: kind, timeoutMs, planDigest: invocationPlanDigest(invocation) },
    contracts: { ...command.contracts, adapter: ADAPTER_REFS[kind] },
  };
  const trigger: ToolStepTrigger = { kind: 'ready', runId: scenario.runId, stepRunId: scenario.stepRunId, stepRunVersion: 2, requestedAtMs: 1_790_000_000_000 };
  return { scenario, trigger, plan, invocation };
};
