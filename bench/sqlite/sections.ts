import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { buildScenario, type Scenario } from '../../domain/scenario';
import { openSqliteStartBarrier, type SqliteStartBarrier } from '../../infrastructure/sqlite';
import { PRAGMAS } from '../../infrastructure/sqlite/sql';
import type { ToolExecutionStartCommand } from '../../domain';
import type { BenchContext } from '../lib/context';
import { longRunOf } from '../lib/longRun';
import { runRound, runSyncRound, summarize, type RoundResult, type Summary } from '../lib/measure';
import { target } from '../lib/report';
import { flatWhy } from '../lib/flatWhy';
import { lifecycleOf, startWriteOf, trustedDecoded } from '../lib/startRows';
import { ROW_WRITING_TRIGGERS, SqliteWriter } from './bulk';
import { canonicalBytesOfStart, leastOf, sqliteBytesAround, type BytesPerStart } from '../lib/bytes';
import { verifyWholeStore } from './verifyCost';
import { cachedSeed, seedStartedRuns } from './seed';

// SQLite: the product's `prepare` in FULL and NORMAL against a bare transaction writing the
// same rows and the commit floor; exact replay against one prepared get; the cost as stored
// barriers and Run streams grow. One connection: every figure is at one client.

type Sync = 'FULL' | 'NORMAL';

// Ids unique to this run: the cached 10^6 database keeps every start a previous run made.
const RUN = randomBytes(4).toString('hex');
let counter = 0;
const fresh = (tag: string, n: number): Scenario[] => {
  const base = `${tag}${RUN}${(counter++).toString(36)}-`;
  return Array.from({ length: n }, (_, i) => buildScenario({ prefix: `${base}${i}` }));
};

const openProduct = async (path: string, sync: Sync): Promise<{ a: SqliteStartBarrier; w: SqliteWriter }> => {
  const a = await openSqliteStartBarrier({ path, synchronous: sync });
  return { a, w: new SqliteWriter(a.db as Database.Database) };
};

/** A migrated database driven by hand (no authority): the bare baseline. */
const openBare = async (path: string, sync: Sync): Promise<SqliteWriter> => {
  await (await openSqliteStartBarrier({ path, synchronous: sync })).close();
  const db = new Database(path);
  for (const p of PRAGMAS(sync, 5000)) db.pragma(p);
  return new SqliteWriter(db);
};

/**
 * The bare baseline on a store with no triggers: the same rows without the database's own
 * checks (R9.1), which the bare transaction and the product both pay. Only the difference of
 * its CPU to the bare's is reported (the share of the triggers); nothing is compared to it.
 * The triggers that write the in-doubt index stay: they write rows, they check nothing.
 */
const openUntriggered = async (path: string, sync: Sync): Promise<SqliteWriter> => {
  const w = await openBare(path, sync);
  const triggers = w.db.prepare("SELECT name FROM sqlite_master WHERE type = 'trigger'").all() as { name: string }[];
  for (const t of triggers) if (!ROW_WRITING_TRIGGERS.includes(t.name)) w.db.exec(`DROP TRIGGER ${t.name}`);
  return w;
};

/** The NORMAL commit floor of the throughput section, when it ran in this process. */
const floorOf = (ctx: BenchContext): { floor?: Summary } => (ctx.floors['sqlite-NORMAL'] ? { floor: ctx.floors['sqlite-NORMAL'] } : {});

const prepareRound = async (a: SqliteStartBarrier, commands: readonly ToolExecutionStartCommand[]): Promise<RoundResult> =>
  runRound({ clients: 1, opsPerClient: commands.length, op: (_c, i) => a.barriers.prepare(commands[i]!) });

export const sqliteSections = async (ctx: BenchContext, which: { throughput?: boolean; stored?: boolean; stream?: boolean } = {}): Promise<void> => {
  if (which.throughput ?? true) {
    await throughputAndReplay(ctx);
    await bytesPerStart(ctx);
  }
  if (which.stored ?? true) await scaleStored(ctx);
  if (which.stream ?? true) await scaleStream(ctx);
};

const throughputAndReplay = async (ctx: BenchContext): Promise<void> => {
  const { rounds, sqliteOps: n, latencyOps } = ctx.sizes;
  const modes: Sync[] = ['FULL', 'NORMAL'];
  const product = new Map<Sync, { a: SqliteStartBarrier; w: SqliteWriter }>();
  const bare = new Map<Sync, SqliteWriter>();
  const untriggered = await openUntriggered(join(ctx.tmp, 'bare-untriggered-FULL.db'), 'FULL');
  for (const m of modes) {
    product.set(m, await openProduct(join(ctx.tmp, `product-${m}.db`), m));
    bare.set(m, await openBare(join(ctx.tmp, `bare-${m}.db`), m));
  }
  const r: Record<string, RoundResult[]> = {};
  const push = (k: string, v: RoundResult) => (r[k] ??= []).push(v);
  for (let round = 0; round < rounds; round++) {
    ctx.log(`sqlite round ${round + 1}/${rounds}`);
    for (const m of round % 2 === 0 ? modes : [...modes].reverse()) {
      const { a, w } = product.get(m)!;
      const b = bare.get(m)!;
      push(`floor-${m}`, await runRound({ clients: 1, opsPerClient: n, op: (_c, i) => b.floor(i) }));

      const scenarios = fresh('s', n);
      w.readyRuns(scenarios);
      const commands = scenarios.map((s) => s.startCommand());
      push(`prepare-${m}`, await prepareRound(a, commands));
      const replay = commands.slice(0, latencyOps);
      push(`replay-${m}`, await prepareRound(a, replay));
      push(`get-${m}`, runSyncRound(replay.length, (i) => w.get(replay[i]!.startId)));

      const bareScenarios = fresh('b', n);
      b.readyRuns(bareScenarios);
      const now = Date.now();
      const writes = bareScenarios.map((s) => startWriteOf(trustedDecoded(s.startCommand()), lifecycleOf(s).state, now));
      push(`bare-${m}`, await runRound({ clients: 1, opsPerClient: n, op: (_c, i) => b.bareStart(writes[i]!) }));
      if (m === 'FULL') {
        const plain = fresh('u', n);
        untriggered.readyRuns(plain);
        const plainWrites = plain.map((s) => startWriteOf(trustedDecoded(s.startCommand()), lifecycleOf(s).state, now));
        push('bare-untriggered-FULL', await runRound({ clients: 1, opsPerClient: n, op: (_c, i) => untriggered.bareStart(plainWrites[i]!) }));
      }

    }
  }
  untriggered.db.close();
  for (const m of modes) {
    await product.get(m)!.a.close();
    bare.get(m)!.db.close();
  }
  const s = Object.fromEntries(Object.entries(r).map(([k, v]) => [k, summarize(v)]));
  for (const m of modes) {
    const floor = s[`floor-${m}`]!;
    ctx.floors[`sqlite-${m}`] = floor;
    ctx.figures.push(
      { id: `sqlite.floor.${m}`, section: 'sqlite', label: `SQLite ${m}: commit floor (BEGIN IMMEDIATE; INSERT; COMMIT)`, clients: 1, summary: floor, floor },
      { id: `sqlite.bare.${m}`, section: 'sqlite', label: `SQLite ${m}: bare transaction, same rows, no client checks (the schema's triggers run)`, clients: 1, summary: s[`bare-${m}`]!, floor },
      { id: `sqlite.prepare.${m}`, section: 'sqlite', label: `SQLite ${m}: prepare (new start)`, clients: 1, summary: s[`prepare-${m}`]!, floor },
      { id: `sqlite.replay.${m}`, section: 'sqlite', label: `SQLite ${m}: prepare, exact replay`, clients: 1, summary: s[`replay-${m}`]!, floor },
      { id: `sqlite.get.${m}`, section: 'sqlite', label: `SQLite ${m}: one prepared get (barrier by start_id)`, clients: 1, summary: s[`get-${m}`]! },
    );
  }
  ctx.figures.push({
    id: 'sqlite.bare-untriggered.FULL',
    section: 'sqlite',
    label: 'SQLite FULL: bare transaction, same rows, every trigger dropped (the share of the database checks)',
    clients: 1,
    summary: s['bare-untriggered-FULL']!,
    floor: s['floor-FULL']!,
  });
};

/**
 * Bytes per start on SQLite FULL: database file growth and WAL frames appended, for `prepare`
 * and for the bare transaction writing the same rows, beside the canonical bytes of the records.
 */
const bytesPerStart = async (ctx: BenchContext): Promise<void> => {
  const n = ctx.sizes.quick ? 40 : 500;
  const productPath = join(ctx.tmp, 'bytes-product.db');
  const barePath = join(ctx.tmp, 'bytes-bare.db');
  const { a, w } = await openProduct(productPath, 'FULL');
  const b = await openBare(barePath, 'FULL');
  const rounds: Record<'product' | 'bare', BytesPerStart[]> = { product: [], bare: [] };
  let canonical = 0;
  try {
    for (let round = 0; round < ctx.sizes.rounds; round++) {
      const scenarios = fresh('y', n);
      w.readyRuns(scenarios);
      const commands = scenarios.map((s) => s.startCommand());
      rounds.product.push((await sqliteBytesAround(w.db, productPath, n, () => prepareRound(a, commands))).bytes);
      const bareScenarios = fresh('q', n);
      b.readyRuns(bareScenarios);
      const now = Date.now();
      const writes = bareScenarios.map((s) => startWriteOf(trustedDecoded(s.startCommand()), lifecycleOf(s).state, now));
      canonical = writes.reduce((sum, x) => sum + canonicalBytesOfStart(x), 0) / writes.length;
      rounds.bare.push((await sqliteBytesAround(b.db, barePath, n, async () => writes.forEach((x) => b.bareStart(x)))).bytes);
    }
  } finally {
    await a.close();
    b.db.close();
  }
  ctx.bytes.push(
    { id: 'sqlite.bytes.prepare', label: 'SQLite FULL: prepare (new start)', ...leastOf(rounds.product), canonicalBytes: canonical, starts: n },
    { id: 'sqlite.bytes.bare', label: 'SQLite FULL: bare transaction, same rows', ...leastOf(rounds.bare), canonicalBytes: canonical, starts: n },
  );
};

/** Logs a seed every tenth of the way: Runs done of the total, the rate so far and since the last line. */
const seedProgress = (ctx: BenchContext): ((done: number, total: number) => void) => {
  const t0 = performance.now();
  let last = { done: 0, at: t0 };
  const rate = (runs: number, ms: number) => `${Math.round((runs / ms) * 1000).toLocaleString('en-US')}/s`;
  return (done, total) => {
    if (done < total && done - last.done < total / 10) return;
    const now = performance.now();
    ctx.log(`  seeded ${done.toLocaleString('en-US')}/${total.toLocaleString('en-US')} Runs, ${rate(done, now - t0)} overall, ${rate(done - last.done, now - last.at)} lately`);
    last = { done, at: now };
  };
};

/** Starts/s with few and with many barriers already stored (NORMAL, so fsync does not hide it). */
const scaleStored = async (ctx: BenchContext): Promise<void> => {
  const { rounds, scaleOps: n, scaleSmall, scaleLarge } = ctx.sizes;
  const smallPath = join(ctx.tmp, `scale-${scaleSmall}.db`);
  const t0 = performance.now();
  await seedStartedRuns(smallPath, scaleSmall, `small-`);
  const small = { path: smallPath, cached: false, seedMs: performance.now() - t0 };
  ctx.log(`sqlite scale: ${scaleLarge} stored barriers (cache ${ctx.cacheDir})`);
  const large = ctx.sizes.quick
    ? await (async () => {
        const path = join(ctx.tmp, `scale-${scaleLarge}.db`);
        const t = performance.now();
        await seedStartedRuns(path, scaleLarge, 'large-', seedProgress(ctx));
        return { path, cached: false, seedMs: performance.now() - t };
      })()
    : await cachedSeed(ctx.cacheDir, scaleLarge, seedProgress(ctx));
  if (!large.cached) ctx.log(`  seeded ${scaleLarge.toLocaleString('en-US')} Runs in ${(large.seedMs / 1000).toFixed(0)} s`);
  const dbs = [
    { key: 'small', count: scaleSmall, ...(await openProduct(small.path, 'NORMAL')), seed: small },
    { key: 'large', count: scaleLarge, ...(await openProduct(large.path, 'NORMAL')), seed: large },
  ];
  // The seeded rows are real ones: a few, picked at random, must pass the verified read (R5.3).
  const verified: string[] = [];
  for (const d of dbs) {
    for (let k = 0; k < 3; k++) {
      const i = Math.floor(Math.random() * d.count);
      const startId = `start-${d.key === 'large' && !ctx.sizes.quick ? `seed${scaleLarge}-` : `${d.key}-`}${i.toString(36).padStart(5, '0')}-v3`;
      const b = await d.a.barriers.getByStartId(startId);
      if (b === null) throw new Error(`seeded barrier ${startId} is missing`);
      verified.push(startId);
    }
  }
  const fmtN = (v: number) => (v >= 1e6 ? `10^${Math.log10(v).toFixed(0)}` : v.toLocaleString('en-US'));
  const stored: Record<string, number> = {};
  for (const d of dbs) stored[d.key] = (d.a.db.prepare('SELECT max(rowid) AS n FROM tool_execution_start_barriers').get() as { n: number }).n;
  const r: Record<string, RoundResult[]> = {};
  for (let round = 0; round < rounds; round++) {
    for (const d of round % 2 === 0 ? dbs : [...dbs].reverse()) {
      const scenarios = fresh(`x${d.key}`, n);
      d.w.readyRuns(scenarios);
      (r[d.key] ??= []).push(await prepareRound(d.a, scenarios.map((s) => s.startCommand())));
    }
  }
  if (ctx.storeVerify) {
    ctx.log(`sqlite scale: recovery.verify() of the ${fmtN(scaleLarge)}-barrier store`);
    await verifyWholeStore(ctx, dbs[1]!.a, `SQLite: recovery.verify() of the ${fmtN(scaleLarge)}-barrier store`, 'sqlite.verify.large');
  }
  for (const d of dbs) await d.a.close();
  const s = { small: summarize(r.small!), large: summarize(r.large!) };
  ctx.extra.sqliteScale = { storedAtStart: stored, verifiedSeededBarriers: verified, seed: { small: small.seedMs, large: { cached: large.cached, seedMs: large.seedMs } } };
  ctx.figures.push(
    { id: 'sqlite.scale.small', section: 'scale', label: `SQLite NORMAL: prepare with ${fmtN(scaleSmall)} barriers stored`, clients: 1, summary: s.small, ...floorOf(ctx) },
    { id: 'sqlite.scale.large', section: 'scale', label: `SQLite NORMAL: prepare with ${fmtN(scaleLarge)} barriers stored`, clients: 1, summary: s.large, ...floorOf(ctx), ...(large.cached ? { note: 'seeded from cache' } : {}) },
  );
  ctx.targets.push(
    target({
      id: 'scale.barriers',
      text: `Flat at ${fmtN(scaleLarge)} stored barriers: ≥ 0.8× of ${fmtN(scaleSmall)} (SQLite)`,
      ratio: s.large.opsPerSec / s.small.opsPerSec,
      required: 0.8,
      detail: `${s.large.opsPerSec.toFixed(0)} vs ${s.small.opsPerSec.toFixed(0)} starts/s`,
      why: flatWhy(s.large, s.small, `the store of ${fmtN(scaleSmall)}`),
    }),
  );
};

/** Starts/s on Runs whose stream holds 10 events against one that holds 10,000. */
const scaleStream = async (ctx: BenchContext): Promise<void> => {
  const { rounds, scaleOps: n, streamShort, streamLong } = ctx.sizes;
  const { a, w } = await openProduct(join(ctx.tmp, 'stream.db'), 'NORMAL');
  const perLong = Math.floor((streamLong - 1) / 2);
  const longRuns = Array.from({ length: Math.ceil((rounds * n) / perLong) }, (_, i) => longRunOf(`long${i}`, streamLong));
  for (const l of longRuns) w.longRun(l);
  const longQueue = longRuns.flatMap((l) => l.ready.map((s, i) => s.startCommand(undefined, `s${i}-v3`)));
  const r: Record<string, RoundResult[]> = {};
  for (let round = 0; round < rounds; round++) {
    const shortRuns = Array.from({ length: n }, (_, i) => longRunOf(`short${round}x${i}`, streamShort));
    for (const l of shortRuns) w.longRun(l);
    const short = shortRuns.map((l) => l.ready[0]!.startCommand(undefined, 's0-v3'));
    const long = longQueue.splice(0, n);
    const order: [string, ToolExecutionStartCommand[]][] = [['short', short], ['long', long]];
    for (const [key, commands] of round % 2 === 0 ? order : order.reverse()) (r[key] ??= []).push(await prepareRound(a, commands));
  }
  await a.close();
  const s = { short: summarize(r.short!), long: summarize(r.long!) };
  ctx.figures.push(
    { id: 'sqlite.stream.short', section: 'scale', label: `SQLite NORMAL: prepare on a Run of ${streamShort} events`, clients: 1, summary: s.short, ...floorOf(ctx) },
    { id: 'sqlite.stream.long', section: 'scale', label: `SQLite NORMAL: prepare on a Run of ${streamLong.toLocaleString('en-US')} events`, clients: 1, summary: s.long, ...floorOf(ctx) },
  );
  ctx.targets.push(
    target({
      id: 'scale.stream',
      text: `Flat on a Run of ${streamLong.toLocaleString('en-US')} events: ≥ 0.8× a Run of ${streamShort} (SQLite)`,
      ratio: s.long.opsPerSec / s.short.opsPerSec,
      required: 0.8,
      detail: `${s.long.opsPerSec.toFixed(0)} vs ${s.short.opsPerSec.toFixed(0)} starts/s`,
      why: flatWhy(s.long, s.short, `the Run of ${streamShort}`),
    }),
  );
};
