import { openSqliteRetention, type CompactionStep } from '../../infrastructure/sqlite';
import { openPostgresRetention, type PgCompactionStep } from '../../infrastructure/postgres';

// A compaction that dies mid-way (crashConformance.ts, compactionCrashSuite): the process
// SIGKILLs itself right after `step`. No rollback is sent; the database must leave each Run
// whole or compacted when the process is gone (R14.2). The target is a SQLite path or a
// PostgreSQL URL.

const main = async (): Promise<void> => {
  const [target, step] = process.argv.slice(2);
  if (target === undefined || step === undefined) throw new Error('usage: compactionCrashWorker <path> <step>');
  const die = (at: CompactionStep | PgCompactionStep) => {
    if (at === step) process.kill(process.pid, 'SIGKILL');
  };
  const retention = target.startsWith('postgres://')
    ? await openPostgresRetention({ connectionString: target, onCompactionStep: die })
    : await openSqliteRetention({ path: target, onCompactionStep: die });
  await retention.compact({ before: Date.now() + 3_600_000 });
  process.stdout.write('survived\n'); // never reached: the spec fails if it is
  await retention.close();
};

main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
