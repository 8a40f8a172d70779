import { openSqliteRetention, type CompactionStep } from '../../infrastructure/sqlite';

// A compaction that dies mid-way (crashConformance.ts, compactionCrashSuite): the process
// SIGKILLs itself right after `step`. No rollback is sent; the database must leave each Run
// whole or compacted when the process is gone (R14.2).

const main = async (): Promise<void> => {
  const [target, step] = process.argv.slice(2);
  if (target === undefined || step === undefined) throw new Error('usage: compactionCrashWorker <path> <step>');
  const retention = await openSqliteRetention({
    path: target,
    onCompactionStep: (at: CompactionStep) => {
      if (at === step) process.kill(process.pid, 'SIGKILL');
    },
  });
  await retention.compact({ before: Date.now() + 3_600_000 });
  process.stdout.write('survived\n'); // never reached: the spec fails if it is
  await retention.close();
};

main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
