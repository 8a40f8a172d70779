import type { StartStep } from '../../application/authority';
import { openPostgresStartBarrier, type PostgresWriteMode } from '../../infrastructure/postgres';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';

// A start that dies mid-transaction (crashConformance.ts): the process SIGKILLs itself inside
// the start transaction, right after `step`. No rollback is sent; the database must discard the
// transaction when the process is gone (R3.9).

const main = async (): Promise<void> => {
  const [backend, target, commandJson, step, writeMode] = process.argv.slice(2);
  if (target === undefined || commandJson === undefined || step === undefined) {
    throw new Error('usage: crashWorker <sqlite|postgres> <path-or-url> <command-json> <step> [batched|stepwise]');
  }
  const hooks = {
    onStartStep: (at: StartStep) => {
      if (at === step) process.kill(process.pid, 'SIGKILL');
    },
  };
  const authority =
    backend === 'sqlite'
      ? await openSqliteStartBarrier({ path: target, hooks })
      : await openPostgresStartBarrier({ connectionString: target, migrate: false, writeMode: (writeMode ?? 'stepwise') as PostgresWriteMode, hooks });
  await authority.barriers.prepare(JSON.parse(commandJson));
  process.stdout.write('survived\n'); // never reached: the spec fails if it is
  await authority.close();
};

main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
