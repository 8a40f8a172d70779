import type Database from 'better-sqlite3';
import { buildScenario } from '../../domain/scenario';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { SqliteWriter } from './bulk';

// Child process: RSS across many starts on one SQLite authority, in a clean process so that
// nothing the other figures allocated is counted. Prints one JSON line.
// argv: <database path> <starts> <sample every>

const main = async (): Promise<void> => {
  const [path, startsArg, everyArg] = process.argv.slice(2);
  const starts = Number(startsArg);
  const every = Number(everyArg);
  const a = await openSqliteStartBarrier({ path: path!, synchronous: 'NORMAL' });
  const w = new SqliteWriter(a.db as Database.Database);
  const samples: { starts: number; rssMb: number; heapMb: number }[] = [];
  const sample = (done: number) => {
    const m = process.memoryUsage();
    samples.push({ starts: done, rssMb: m.rss / 2 ** 20, heapMb: m.heapUsed / 2 ** 20 });
  };
  sample(0);
  const t0 = performance.now();
  for (let done = 0; done < starts; ) {
    const batch = Math.min(every, starts - done);
    const scenarios = Array.from({ length: batch }, (_, i) => buildScenario({ prefix: `rss${done + i}` }));
    w.readyRuns(scenarios);
    for (const s of scenarios) await a.barriers.prepare(s.startCommand());
    done += batch;
    sample(done);
  }
  const elapsedMs = performance.now() - t0;
  await a.close();
  process.stdout.write(`${JSON.stringify({ samples, elapsedMs })}\n`);
};

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
