import { writeSync } from 'node:fs';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { openPostgresStartBarrier } from '../../infrastructure/postgres';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { openExecution, runTool } from '../../application/saga';
import { plansFromEnv } from '../../testkit/planKeys';
import { callOf } from './crashTool';

// A runtime that runs one tool call with runTool and is killed (SIGKILL, by the tool's side)
// after the side effect, before it hears the answer or records the outcome.
// Usage: runToolChild.ts sqlite|postgres LOCATION TOOL_URL RUN_ID CALL_ID

const [kind, location, url, runId, callId] = process.argv.slice(2);

const main = async (): Promise<void> => {
  const authority: RecoverableStartBarrierAuthority =
    kind === 'postgres' ? await openPostgresStartBarrier({ connectionString: location!, plans: plansFromEnv() }) : await openSqliteStartBarrier({ path: location!, plans: plansFromEnv() });
  const execution = openExecution(authority, { execution: 'enabled' });
  await runTool(execution, callOf(url!, runId!, callId!), { leaseGraceMs: 0 });
  writeSync(2, 'runTool returned: the tool never killed this runtime\n');
  process.exit(3);
};

main().catch((e: unknown) => {
  writeSync(2, `${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(4);
});
