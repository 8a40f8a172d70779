// A child process for the crash suite: runs starts against one store (a SQLite file or a
// PostgreSQL database) and prints an ACK line for every start it saw committed. With
// KILL_AT_STEP it SIGKILLs itself inside the start transaction at that step of start number
// KILL_AT_START.
import { START_STEPS, type StartStep, type StartStepHook } from '../../application/authority';
import { openPostgresStartBarrier } from '../../infrastructure/postgres';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { buildScenario } from '../../domain/scenario';

const [backend, target] = process.argv.slice(2) as [string, string];
const killAtStep = process.env.KILL_AT_STEP as StartStep | undefined;
const killAtStart = Number(process.env.KILL_AT_START ?? '0');
const total = Number(process.env.STARTS ?? '1000');
let startNo = 0;

if (killAtStep !== undefined && !START_STEPS.includes(killAtStep)) throw new Error(`unknown step ${killAtStep}`);

(async () => {
  const onStartStep: StartStepHook = (step) => {
    if (step === killAtStep && startNo === killAtStart) process.kill(process.pid, 'SIGKILL');
  };
  const authority =
    backend === 'sqlite'
      ? await openSqliteStartBarrier({ path: target, hooks: { onStartStep } })
      : await openPostgresStartBarrier({ connectionString: target, migrate: false, hooks: { onStartStep } });
  for (startNo = 0; startNo < total; startNo++) {
    const s = buildScenario();
    for (const c of s.lifecycle) await authority.runs.handle(c);
    const command = s.startCommand();
    const r = await authority.barriers.prepare(command);
    process.stdout.write(`ACK ${r.outcome} ${command.startId}\n`);
  }
  await authority.close();
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
