import { writeSync } from 'node:fs';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { openPostgresStartBarrier } from '../../infrastructure/postgres/postgresAuthority';
import { createToolStepSaga, openExecution } from '../../application/saga';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { INVOCATION, contractAdapterFor } from './sagaConformance';
import { plansFromEnv } from '../../testkit/planKeys';

// A saga process that dies between the commit of its start and the adapter's first action:
// the adapter kills the process (SIGKILL, no cleanup, no outcome, its claim never released)
// the moment it is reached.
// Usage: crashChild.ts sqlite|postgres LOCATION TRIGGER_JSON PLAN_JSON

const [kind, location, trigger, plan] = process.argv.slice(2);

const main = async (): Promise<void> => {
  const authority: RecoverableStartBarrierAuthority =
    kind === 'postgres' ? await openPostgresStartBarrier({ connectionString: location!, plans: plansFromEnv() }) : await openSqliteStartBarrier({ path: location!, plans: plansFromEnv() });
  const startPlan = JSON.parse(plan!);
  const saga = createToolStepSaga({
    execution: openExecution(authority, { execution: 'enabled' }),
    leaseGraceMs: 0,
    adapter: contractAdapterFor(startPlan, {}, async (context) => {
      writeSync(1, `committed ${context.barrier.startId}\n`);
      process.kill(process.pid, 'SIGKILL');
      await new Promise(() => undefined);
      throw new Error('unreachable');
    }),
  });
  await saga.drive(JSON.parse(trigger!), startPlan, INVOCATION);
  writeSync(2, 'the saga returned: the adapter port was never reached\n');
  process.exit(3);
};

main().catch((e: unknown) => {
  writeSync(2, `${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(4);
});
