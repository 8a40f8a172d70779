import { openPostgresStartBarrier, type PostgresWriteMode, type StartStep } from '../../infrastructure/postgres';

// A start that dies mid-transaction (crash.int.spec.ts): the process SIGKILLs itself inside the
// start transaction, right after `step`. No rollback is sent; the server must discard the
// transaction when the connection drops (R3.9).

const main = async (): Promise<void> => {
  const [url, commandJson, step, writeMode] = process.argv.slice(2);
  if (url === undefined || commandJson === undefined || step === undefined) throw new Error('usage: crashWorker <url> <command-json> <step> [batched|stepwise]');
  const authority = await openPostgresStartBarrier({
    connectionString: url,
    migrate: false,
    writeMode: (writeMode ?? 'stepwise') as PostgresWriteMode,
    hooks: {
      onStartStep: (at: StartStep) => {
        if (at === step) process.kill(process.pid, 'SIGKILL');
      },
    },
  });
  await authority.barriers.prepare(JSON.parse(commandJson));
  process.stdout.write('survived\n'); // never reached: the spec fails if it is
  await authority.close();
};

main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
