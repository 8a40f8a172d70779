import type { StartStep } from '../../application/authority';
import { createToolStepSaga, openExecution } from '../../application/saga';
import { openPostgresStartBarrier, type PostgresWriteMode } from '../../infrastructure/postgres';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { TEST_PLANS } from '../../testkit/planKeys';
import { INVOCATION, contractAdapterFor } from '../saga/sagaConformance';

// A saga drive that dies (crashConformance.ts): SIGKILL inside its start transaction right after
// `step`, or, with step `adapter`, once the start has committed and the adapter is reached. The
// start writes its sealed invocation plan in its own transaction (R12.2): the database must keep
// both the barrier and its plan, or neither.

const main = async (): Promise<void> => {
  const [backend, target, triggerJson, planJson, step, writeMode] = process.argv.slice(2);
  if (target === undefined || triggerJson === undefined || planJson === undefined || step === undefined) {
    throw new Error('usage: sagaCrashWorker <sqlite|postgres> <path-or-url> <trigger-json> <plan-json> <step|adapter> [batched|stepwise]');
  }
  const kill = (): never => {
    process.kill(process.pid, 'SIGKILL');
    throw new Error('unreachable');
  };
  const hooks = { onStartStep: (at: StartStep) => void (at === step && kill()) };
  const authority =
    backend === 'sqlite'
      ? await openSqliteStartBarrier({ path: target, hooks, plans: TEST_PLANS })
      : await openPostgresStartBarrier({ connectionString: target, migrate: false, writeMode: (writeMode ?? 'batched') as PostgresWriteMode, hooks, plans: TEST_PLANS });
  const plan = JSON.parse(planJson);
  const saga = createToolStepSaga({ execution: openExecution(authority, { execution: 'enabled' }), adapter: contractAdapterFor(plan, {}, async () => kill()) });
  await saga.drive(JSON.parse(triggerJson), plan, INVOCATION);
  process.stdout.write('survived\n'); // never reached: the spec fails if it is
};

main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
