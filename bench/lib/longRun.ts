import { buildScenario, type Scenario } from '../../domain/scenario';
import { decideLifecycle, evolve, type RunState, type RunStreamEvent } from '../../domain';
import { lifecycleOf } from './startRows';

// A Run whose stream already holds `events` events: RunCreated, then Tool StepRuns created
// and made ready (two events each), then one StepRun only created if the count is even. Each
// ready StepRun can be started once; the starts measured on it see the long stream.

export interface LongRun {
  readonly runId: string;
  readonly events: RunStreamEvent[];
  /** Ready StepRuns, each with the state a start command needs. */
  readonly ready: Scenario[];
  readonly state: RunState;
}

export const longRunOf = (prefix: string, events: number): LongRun => {
  const steps = Math.floor((events - 1) / 2);
  const base = buildScenario({ prefix });
  const head = lifecycleOf(buildScenario({ prefix, stepRunId: `${prefix}-s0` }));
  const all: RunStreamEvent[] = [head.events[0]!];
  let run = evolve({ run: null, stepRuns: {} }, head.events[0]!).run!;
  const ready: Scenario[] = [];
  const stepRuns: RunState['stepRuns'][string][] = [];
  const apply = (stepRunId: string, commands: Scenario['lifecycle']): void => {
    // Each StepRun's lifecycle depends only on itself: fold it on a partial state (as the
    // stores do) so seeding a long Run stays linear.
    let state: RunState = { run, stepRuns: {} };
    for (const c of commands) {
      const decided = decideLifecycle(c, state);
      state = decided.reduce(evolve, state);
      all.push(...decided);
    }
    run = state.run!;
    stepRuns.push(state.stepRuns[stepRunId]!);
  };
  for (let i = 0; i < steps; i++) {
    const stepRunId = `${prefix}-s${i}`;
    const s = buildScenario({ prefix, runId: base.runId, projectId: base.projectId, stepRunId });
    apply(stepRunId, s.lifecycle.slice(1));
    ready.push(s);
  }
  if (all.length < events) {
    const s = buildScenario({ prefix, runId: base.runId, projectId: base.projectId, stepRunId: `${prefix}-extra` });
    apply(`${prefix}-extra`, s.lifecycle.slice(1, 2));
  }
  return { runId: base.runId, events: all, ready, state: { run, stepRuns: Object.fromEntries(stepRuns.map((s) => [s.stepRunId, s])) } };
};
