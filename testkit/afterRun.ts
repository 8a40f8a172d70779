// Clean-ups that belong to the whole test run (a shared template database), not to one suite.
// testkit/mochaHooks.ts runs them after the last spec; a script outside mocha may call
// runAfterRun itself.

const cleanups: (() => Promise<void>)[] = [];

export const afterRun = (cleanup: () => Promise<void>): void => {
  cleanups.push(cleanup);
};

export const runAfterRun = async (): Promise<void> => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
};
