import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { SqliteWriter } from './bulk';
import { COMPILED, PROJECT_ROOT, benchScript } from '../lib/compiled';
import type { SeedBatch, SeedRequest, SeedWorkerData } from './seedWorker';

// Seeds a database with `count` started Runs (one barrier each). Generator worker threads
// derive the rows with the domain and ship each batch as one flat string (seedRows.ts); this
// thread inserts them with positional prepared INSERTs while the generators work on the next
// batches. Generating and inserting a Run cost about the same (~0.18 ms each on the 2-core
// bench machine), so one generator runs at normal priority and a second one at the lowest,
// where it only uses CPU the other two leave idle (on 2 cores: ~5-10% faster than one
// generator; at normal priority it slowed the insert down instead). Large seeds are cached
// under bench-results/cache/, keyed by the SQLite migrations and this seeder's version, so
// only the first run pays for them.

const SEEDER_VERSION = '1';
const MIGRATIONS_DIR = join(PROJECT_ROOT, 'migrations', 'sqlite');
/** Runs per message (~3 MB of row text): small enough to die young in the generator's heap. */
const BATCH = 200;
/** Messages asked of each generator ahead of the one being inserted, so it does not wait on a commit. */
const AHEAD = 4;
/**
 * Runs per transaction (ten messages). A commit per message cost ~15% more insert CPU: every
 * commit writes the hot index pages (the random lifecycle event ids) again. 10,000 was no better.
 */
const COMMIT_EVERY = 2000;
/** A young generation that holds a batch under construction (fewer survivors to copy). */
const GENERATOR_YOUNG_GENERATION_MB = 256;

const schemaKey = (): string => {
  const h = createHash('sha256').update(SEEDER_VERSION);
  for (const f of readdirSync(MIGRATIONS_DIR).sort()) h.update(f).update(readFileSync(join(MIGRATIONS_DIR, f)));
  return h.digest('hex').slice(0, 12);
};

const spawnWorker = (data: SeedWorkerData): Worker =>
  new Worker(`${COMPILED ? '' : "require('tsx/cjs'); "}require(${JSON.stringify(benchScript(__dirname, 'seedWorker'))});`, {
    eval: true,
    workerData: data,
    resourceLimits: { maxYoungGenerationSizeMb: GENERATOR_YOUNG_GENERATION_MB },
  });

/** Runs seeded so far out of `total` (called after every batch). */
export type SeedProgress = (done: number, total: number) => void;

export const seedStartedRuns = async (path: string, count: number, prefix: string, onProgress?: SeedProgress): Promise<void> => {
  await (await openSqliteStartBarrier({ path, synchronous: 'NORMAL' })).close(); // migrate
  const db = new Database(path);
  try {
    // Bulk load into a file nobody else has open: no journal (WAL cannot switch to OFF directly,
    // and better-sqlite3's defensive mode refuses OFF until unsafe mode is on; the rollback
    // journal it silently kept copied every index page a commit touched: ~15% slower at
    // 250,000 Runs), no fsync, a 1 GiB page cache. A failed seed is never used: cachedSeed only renames a
    // finished file. Foreign keys stay on: the database checks every reference, at no
    // measurable cost here. The product's own pragmas apply again whenever it opens the file.
    db.pragma('journal_mode = DELETE');
    db.unsafeMode(true);
    db.pragma('journal_mode = OFF');
    db.pragma('synchronous = OFF');
    db.pragma('cache_size = -1048576');
    db.pragma('foreign_keys = ON');
    const writer = new SqliteWriter(db);
    await writer.withoutHeadCheck(() => insertGenerated(writer, count, prefix, onProgress));
    db.pragma('journal_mode = WAL');
    db.unsafeMode(false);
  } finally {
    db.close();
  }
};

const insertGenerated = async (writer: SqliteWriter, count: number, prefix: string, onProgress?: SeedProgress): Promise<void> => {
  if (count <= 0) return;
  const committedAtMs = Date.now();
  const workers = [false, true].map((background) => spawnWorker({ prefix, committedAtMs, background }));
  const db = writer.db;
  try {
    await new Promise<void>((resolve, reject) => {
      let next = 0;
      let done = 0;
      let uncommitted = 0;
      let failed = false;
      const fail = (e: unknown) => {
        failed = true;
        reject(e);
      };
      const ask = (w: Worker) => {
        if (next >= count) return;
        const req: SeedRequest = { from: next, to: Math.min(count, next + BATCH) };
        next = req.to;
        w.postMessage(req);
      };
      const insert = (w: Worker, b: SeedBatch) => {
        if (failed) return;
        try {
          ask(w); // the generator starts on a later batch while this one is inserted
          if (!db.inTransaction) db.exec('BEGIN IMMEDIATE');
          const runs = writer.seededBatch(b.rows);
          if (runs !== b.to - b.from) throw new Error(`seed batch ${b.from}..${b.to} held ${runs} Runs`);
          done += runs;
          uncommitted += runs;
          if (uncommitted >= COMMIT_EVERY || done === count) {
            db.exec('COMMIT');
            uncommitted = 0;
          }
          onProgress?.(done, count);
          if (done === count) resolve();
        } catch (e) {
          fail(e); // no ROLLBACK without a journal: the caller discards the file
        }
      };
      for (const w of workers) {
        w.on('error', fail);
        w.on('exit', (code) => {
          if (done < count) fail(new Error(`seed generator exited (code ${code}) after ${done} of ${count} Runs`));
        });
        w.on('message', (b: SeedBatch) => insert(w, b));
        for (let k = 0; k < AHEAD; k++) ask(w);
      }
    });
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
};

/** A database with `count` stored barriers, from the cache when one exists. */
export const cachedSeed = async (cacheDir: string, count: number, onProgress?: SeedProgress): Promise<{ path: string; cached: boolean; seedMs: number }> => {
  mkdirSync(cacheDir, { recursive: true });
  const path = join(cacheDir, `sqlite-${count}-barriers-${schemaKey()}.db`);
  if (existsSync(path)) return { path, cached: true, seedMs: 0 };
  for (const f of readdirSync(cacheDir)) if (f.startsWith(`sqlite-${count}-barriers-`)) rmSync(join(cacheDir, f), { force: true });
  const t0 = performance.now();
  const tmp = `${path}.partial`;
  rmSync(tmp, { force: true });
  try {
    await seedStartedRuns(tmp, count, `seed${count}-`, onProgress);
  } catch (e) {
    rmSync(tmp, { force: true }); // unjournaled: a failed seed is garbage
    throw e;
  }
  renameSync(tmp, path);
  return { path, cached: false, seedMs: performance.now() - t0 };
};
