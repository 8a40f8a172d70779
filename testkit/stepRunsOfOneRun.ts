import type { ToolExecutionStartCommand } from '../domain';
import type { Scenario } from '../domain/scenario';
import type { StartBarrierAuthority } from '../application/authority';

/**
 * `n` more ready StepRuns of the scenario's Run (ids tagged `tag`), made through `authority`, and
 * a start command for each: starts that contend for one Run.
 */
export const stepRunsOfOneRun = async (authority: Pick<StartBarrierAuthority, 'runs'>, s: Scenario, n: number, tag: string): Promise<ToolExecutionStartCommand[]> => {
  const commands: ToolExecutionStartCommand[] = [];
  for (let i = 0; i < n; i++) {
    const id = `${s.stepRunId}-${tag}${i}`;
    await authority.runs.handle({ type: 'CreateStepRun', data: { runId: s.runId, stepRunId: id, kind: 'tool', toolDefinition: s.stepRun.toolDefinition!, requestedAtMs: 1 } });
    await authority.runs.handle({ type: 'MarkStepRunReady', data: { runId: s.runId, stepRunId: id, requestedAtMs: 1 } });
    const raw = s.startCommand((await authority.runs.getStepRun(s.runId, id))!, `${tag}${i}`);
    commands.push({ ...raw, stepRun: { ...raw.stepRun, stepRunId: id } });
  }
  return commands;
};
