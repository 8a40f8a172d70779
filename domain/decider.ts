import type { RunStreamEvent } from './events';
import { decideLifecycle, type LifecycleCommand } from './lifecycle';
import { decideStart, type StartToolExecution } from './startDecider';
import { evolve, initialRunState, type RunState } from './state';

export type RunCommand = LifecycleCommand | StartToolExecution;

/**
 * One decider per Run stream: orchestration's lifecycle commands and the start, in emmett's
 * `{ decide, evolve, initialState }` shape. (Not annotated as emmett's `Decider`: its command
 * constraint wants `metadata.now`, and our business time travels in the command itself.)
 */
export const runDecider: {
  decide: (command: RunCommand, state: RunState) => RunStreamEvent[];
  evolve: (state: RunState, event: RunStreamEvent) => RunState;
  initialState: () => RunState;
} = {
  decide: (command, state) =>
    command.type === 'StartToolExecution' ? [...decideStart(command, state)] : decideLifecycle(command, state),
  evolve,
  initialState: initialRunState,
};

export const foldRun = (events: readonly RunStreamEvent[], from: RunState = initialRunState()): RunState => events.reduce(evolve, from);
