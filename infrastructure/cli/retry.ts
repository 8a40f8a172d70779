import { PreconditionError, nextStartCommand, planOfBarrier, type ToolExecutionStartCommand } from '../../domain';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import type { StepRunView } from '../../domain/records';

// `qinglong-barrier retry RUN STEP`: the manual retry of a lost attempt without editing seven
// ids and a digest by hand. A lost StepRun is marked ready (a lifecycle fact, as `apply` would
// append it); then the next attempt's start command is built from the last committed barrier
// (what was admitted) and the StepRun as stored now (version and digest). It is printed, not
// run: the operator reviews it and runs `prepare`, which is where the start is decided.

export interface RetryPlan {
  /** True when this call moved the StepRun from lost to ready. */
  readonly markedReady: boolean;
  readonly stepRun: StepRunView;
  /** The start command of the next attempt, for `prepare --command`. */
  readonly command: ToolExecutionStartCommand;
}

export const planRetry = async (authority: RecoverableStartBarrierAuthority, runId: string, stepRunId: string, nowMs: number): Promise<RetryPlan> => {
  const attempts = await authority.recovery.history(runId, stepRunId);
  const last = attempts[attempts.length - 1];
  let stepRun = await authority.runs.getStepRun(runId, stepRunId);
  if (stepRun === null) throw new PreconditionError('step_run_not_found', `StepRun ${stepRunId} does not exist in Run ${runId}`);
  if (last === undefined) throw new PreconditionError('start_not_found', `StepRun ${stepRunId} has no earlier attempt to retry; start it from orchestration's plan`);
  let markedReady = false;
  if (stepRun.status === 'lost') {
    await authority.runs.handle({ type: 'MarkStepRunReady', data: { runId, stepRunId, requestedAtMs: nowMs, expectedStepRunVersion: stepRun.version } });
    markedReady = true;
    stepRun = await authority.runs.getStepRun(runId, stepRunId);
    if (stepRun === null) throw new PreconditionError('step_run_not_found', `StepRun ${stepRunId} disappeared from Run ${runId}`);
  }
  if (stepRun.status !== 'ready') {
    throw new PreconditionError(
      'status_mismatch',
      `StepRun ${stepRunId} is ${stepRun.status}; retry starts a new attempt after lost (resolve the in-doubt start as lost first)`,
      ['lost', 'ready'],
      stepRun.status,
    );
  }
  return { markedReady, stepRun, command: nextStartCommand(planOfBarrier(last.barrier.record), stepRun, nowMs) };
};
