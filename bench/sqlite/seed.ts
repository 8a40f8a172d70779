import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import type { SeededRun } from '../lib/startRows';
import { SqliteWriter } from './bulk';
import type { SeedRequest } from './seedWorker';

// Seeds a database with `count` started Runs (one barrier each) through the bulk writer, with
// generation on a worker thread (one: on two cores, a second generator only slows the insert). Large seeds are cached under bench-results/cache/, keyed by the
// SQLite migrations and this seeder's version, so only the first run pays for them.

const SEEDER_VERSION = '1';
const MIGRATIONS_DIR = join(__dirname, '..', '..', 'migrations', 'sqlite');

const schemaKey = (): string => {
  const h = createHash('sha256').update(SEEDER_VERSION);
  for (const f of readdirSync(MIGRATIONS_DIR).sort()) h.update(f).update(readFileSync(join(MIGRATIONS_DIR, f)));
  return h.digest('hex').slice(0, 12);
};

const spawnWorker = (): Worker =>
  new Worker(`require('tsx/cjs'); require(${JSON.stringify(join(__dirname, 'seedWorker.ts'))});`, { eval: true });

export const seedStartedRuns = async (path: string, count: number, prefix: string, onProgress?: (done: number) => void): Promise<void> => {
  await (await openSqliteStartBarrier({ path, synchronous: 'NORMAL' })).close(); // migrate
  const db = new Database(path);
  try {
    db.pragma('journal_mode = DELETE');
    db.pragma('journal_mode = OFF');
    db.pragma('synchronous = OFF');
    db.pragma('cache_size = -1048576');
    db.pragma('foreign_keys = ON');
    const writer = new SqliteWriter(db);
    const batch = 2000;
    const workers = [spawnWorker()];
    const committedAtMs = Date.now();
    let next = 0;
    let done = 0;
    const ask = (w: Worker): Promise<Omit<SeededRun, never>[]> | undefined => {
      if (next >= count) return undefined;
      const req: SeedRequest = { prefix, from: next, to: Math.min(count, next + batch), committedAtMs };
      next = req.to;
      return new Promise((resolve, reject) => {
        const onError = (e: Error) => reject(e);
        w.once('error', onError);
        w.once('message', (m: Omit<SeededRun, never>[]) => {
          w.off('error', onError);
          resolve(m);
        });
        w.postMessage(req);
      });
    };
    try {
      const pending = workers.map((w) => ask(w));
      for (let turn = 0; ; turn++) {
        const i = turn % workers.length;
        const p = pending[i];
        if (p === undefined) {
          if (pending.every((x) => x === undefined)) break;
          continue;
        }
        const runs = await p;
        pending[i] = ask(workers[i]!);
        writer.inTransaction(() => writer.seededRuns(runs as SeededRun[]));
        done += runs.length;
        onProgress?.(done);
      }
    } finally {
      await Promise.all(workers.map((w) => w.terminate()));
    }
    db.pragma('journal_mode = WAL');
  } finally {
    db.close();
  }
};

/** A database with `count` stored barriers, from the cache when one exists. */
export const cachedSeed = async (cacheDir: string, count: number, onProgress?: (done: number) => void): Promise<{ path: string; cached: boolean; seedMs: number }> => {
  mkdirSync(cacheDir, { recursive: true });
  const path = join(cacheDir, `sqlite-${count}-barriers-${schemaKey()}.db`);
  if (existsSync(path)) return { path, cached: true, seedMs: 0 };
  for (const f of readdirSync(cacheDir)) if (f.startsWith(`sqlite-${count}-barriers-`)) rmSync(join(cacheDir, f), { force: true });
  const t0 = performance.now();
  const tmp = `${path}.partial`;
  rmSync(tmp, { force: true });
  await seedStartedRuns(tmp, count, `seed${count}-`, onProgress);
  renameSync(tmp, path);
  return { path, cached: false, seedMs: performance.now() - t0 };
};
