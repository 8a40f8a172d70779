import { runAfterRun } from './afterRun';

// Root hooks (loaded by .mocharc.json): the run's shared resources go after the last spec.
export const mochaHooks = {
  afterAll: runAfterRun,
};
