import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Pool } from 'pg';
import { buildScenario, type Scenario } from '../../domain/scenario';
import { openPostgresStartBarrier, type PostgresStartBarrier } from '../../infrastructure/postgres';
import { readStart } from '../../infrastructure/postgres/startRead';
import { DEFAULT_TIMEOUTS } from '../../infrastructure/postgres';
import { benchScript } from '../lib/compiled';
import { pgOpsFor, type BenchContext } from '../lib/context';
import { longRunOf } from '../lib/longRun';
import { runRound, summarize, type RoundResult, type Summary } from '../lib/measure';
import { target, type Figure } from '../lib/report';
import { flatWhy } from '../lib/flatWhy';
import { lifecycleOf, seededRunOf, startWriteOf, trustedDecoded } from '../lib/startRows';
import { countingPool, createDatabase, type BenchDatabase, type PoolCounters } from './admin';
import { BareStart, CREATE_FLOOR, PG_ADD_JSON_COPIES, PG_INDEX_BEFORE_COMPACT, PG_RESTORE_REPEATED_KEYS, floorTransaction, selectBarrier, seedLongRun, seedReadyRuns, seedStartedRuns } from './bulk';
import { pgbenchInit, pgbenchRound } from './pgbench';
import { pgCheckShare } from './checkShare';
import { canonicalBytesOfStart, leastOf, pgBytesAround, type BytesPerStart } from '../lib/bytes';

// PostgreSQL: `prepare` at 1, 4, 8 and 16 clients on distinct Runs, side by side, round by
// round, with the commit floor, a bare transaction writing the same rows, pgbench tpcb-like
// and the emmett-postgresql peer at the same client count; then contention on one Run, and
// exact replay against one indexed SELECT round trip.

// Random ids (UUIDs, as production makes them): sequential ones would share B-tree leaf pages
// and turn SERIALIZABLE's page-level predicate locks into conflicts no real workload has.
const fresh = (_tag: string, n: number): Scenario[] => Array.from({ length: n }, () => buildScenario());

/** A start that fails (e.g. retries exhausted) is counted, not fatal: the figure says how many. */
const failures = { count: 0, calls: 0, byCode: {} as Record<string, number> };
const tolerant = (op: () => Promise<unknown>) => async () => {
  failures.calls++;
  try {
    await op();
  } catch (e) {
    failures.count++;
    const code = String((e as { code?: unknown }).code ?? (e instanceof Error ? e.name : 'unknown'));
    failures.byCode[code] = (failures.byCode[code] ?? 0) + 1;
    if (failures.count <= 3) process.stderr.write(`  prepare failed: ${e instanceof Error ? e.message : String(e)}\n`);
  }
};

class EmmettPeer {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly lines: AsyncIterator<string>;
  private stderr = '';

  constructor(url: string, maxClients: number) {
    this.child = spawn(process.execPath, [...process.execArgv, benchScript(__dirname, 'emmettChild'), url, String(maxClients)], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stderr.on('data', (d: Buffer) => (this.stderr += d.toString()));
    this.lines = createInterface({ input: this.child.stdout })[Symbol.asyncIterator]();
  }

  async round(clients: number, opsPerClient: number, tag: string): Promise<RoundResult> {
    this.child.stdin.write(`${JSON.stringify({ clients, opsPerClient, tag })}\n`);
    const next = await this.lines.next();
    if (next.done === true) throw new Error(`the emmett-postgresql child ended: ${this.stderr.slice(-2000)}`);
    return JSON.parse(next.value) as RoundResult;
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.child.on('close', () => resolve());
      this.child.stdin.end();
    });
  }
}

// Idle connections close after half a second: the server is shared (max_connections 100) and
// pgbench needs its own 16 while our pools wait. `warm` reopens them before each figure.
const poolOptions = {
  idleTimeoutMillis: 500,
  statement_timeout: DEFAULT_TIMEOUTS.statementMs,
  lock_timeout: DEFAULT_TIMEOUTS.lockMs,
  idle_in_transaction_session_timeout: DEFAULT_TIMEOUTS.idleInTransactionMs,
};

interface Product {
  readonly db: BenchDatabase;
  readonly a: PostgresStartBarrier;
  readonly pool: Pool;
  readonly counters: PoolCounters;
}

const openProduct = async (adminUrl: string, maxClients: number): Promise<Product> => {
  const db = await createDatabase(adminUrl);
  const { pool, counters } = countingPool(db.url, maxClients, poolOptions);
  const a = await openPostgresStartBarrier({ pool });
  return { db, a, pool, counters };
};

// The product's pool bounds every statement (R9.5); ANALYZE of a large bench database under load
// can take longer than that bound, and it is setup, not what is measured.
const analyze = (pool: Pool): Promise<unknown> => pool.query('BEGIN; SET LOCAL statement_timeout = 0; ANALYZE; COMMIT');

const warm = (pool: Pool, clients: number): Promise<unknown> => Promise.all(Array.from({ length: clients }, () => pool.query('SELECT 1')));

const counterFn = (c: PoolCounters) => () => ({ roundTrips: c.roundTrips, retries: c.retries, failures: failures.count, bytesIn: c.bytesIn });

export const postgresSections = async (ctx: BenchContext, adminUrl: string): Promise<void> => {
  const { rounds, pgClients, pgbenchSeconds, latencyOps } = ctx.sizes;
  const maxClients = Math.max(...pgClients);
  const dbs: BenchDatabase[] = [];
  const pools: Pool[] = [];
  let peer: EmmettPeer | undefined;
  try {
    ctx.log('postgres: creating databases (product, empty product, bare, pgbench, emmett)');
    const product = await openProduct(adminUrl, maxClients);
    dbs.push(product.db);
    // The product database holds history, as a deployed one does; an empty one (a fresh
    // deployment) is measured beside it at 8 clients.
    ctx.log(`postgres: seeding ${ctx.sizes.pgHistory} started Runs of history`);
    const t0 = performance.now();
    for (let i = 0; i < ctx.sizes.pgHistory; i += 2000) {
      const n = Math.min(2000, ctx.sizes.pgHistory - i);
      await seedStartedRuns(product.pool, Array.from({ length: n }, () => seededRunOf(buildScenario(), Date.now())));
    }
    ctx.extra.pgHistorySeedMs = performance.now() - t0;
    const empty = await openProduct(adminUrl, maxClients);
    dbs.push(empty.db);
    const bareDb = await createDatabase(adminUrl);
    dbs.push(bareDb);
    await (await openPostgresStartBarrier({ connectionString: bareDb.url })).close(); // same schema
    const bare = countingPool(bareDb.url, maxClients, poolOptions);
    pools.push(bare.pool);
    await bare.pool.query(CREATE_FLOOR);
    // The same bare transaction on the start tables as they were before each fact was stored
    // once: a fixed baseline (bulk.ts), so the schema's gain shows.
    const beforeDb = await createDatabase(adminUrl);
    dbs.push(beforeDb);
    await (await openPostgresStartBarrier({ connectionString: beforeDb.url })).close();
    const before = countingPool(beforeDb.url, maxClients, poolOptions);
    pools.push(before.pool);
    await before.pool.query(`${PG_ADD_JSON_COPIES} ${PG_RESTORE_REPEATED_KEYS} ${PG_INDEX_BEFORE_COMPACT}`);
    const pgbenchDb = await createDatabase(adminUrl);
    dbs.push(pgbenchDb);
    await pgbenchInit(pgbenchDb.url, ctx.sizes.quick ? 1 : maxClients);
    const emmettDb = await createDatabase(adminUrl);
    dbs.push(emmettDb);
    peer = new EmmettPeer(emmettDb.url, maxClients);
    const bareStart = new BareStart();
    const bareStartBefore = new BareStart('before-stored-once');

    const r: Record<string, RoundResult[]> = {};
    const push = (k: string, v: RoundResult) => (r[k] ??= []).push(v);
    // Bytes per start, from the 1-client rounds (nothing else of ours writes meanwhile).
    const bytes: Record<'product' | 'bare' | 'before', BytesPerStart[]> = { product: [], bare: [], before: [] };
    let canonical = 0;
    const measured = async (key: 'product' | 'bare' | 'before', pool: Pool, clients: number, total: number, round: () => Promise<RoundResult>): Promise<RoundResult> => {
      if (clients !== 1) return round();
      const { value, bytes: b } = await pgBytesAround(pool, total, round);
      bytes[key].push(b);
      return value;
    };
    for (let round = 0; round < rounds; round++) {
      for (const clients of round % 2 === 0 ? pgClients : [...pgClients].reverse()) {
        ctx.log(`postgres round ${round + 1}/${rounds}, ${clients} clients`);
        const k = pgOpsFor(ctx.sizes, clients);
        const total = clients * k;
        await warm(bare.pool, clients);
        push(`floor-${clients}`, await runRound({ clients, opsPerClient: k, server: true, counters: counterFn(bare.counters), op: (c, i) => floorTransaction(bare.pool, c * k + i) }));

        const scenarios = fresh('p', total);
        await seedReadyRuns(product.pool, scenarios);
        await analyze(product.pool);
        const commands = scenarios.map((s) => s.startCommand());
        await warm(product.pool, clients);
        push(
          `prepare-${clients}`,
          await measured('product', product.pool, clients, total, () =>
            runRound({ clients, opsPerClient: k, server: true, counters: counterFn(product.counters), op: (c, i) => tolerant(() => product.a.barriers.prepare(commands[c * k + i]!))() }),
          ),
        );

        const bareScenarios = fresh('b', total);
        await seedReadyRuns(bare.pool, bareScenarios);
        await analyze(bare.pool);
        const now = Date.now();
        const writes = bareScenarios.map((s) => startWriteOf(trustedDecoded(s.startCommand()), lifecycleOf(s).state, now));
        canonical = writes.reduce((sum, w) => sum + canonicalBytesOfStart(w), 0) / writes.length;
        await warm(bare.pool, clients);
        push(
          `bare-${clients}`,
          await measured('bare', bare.pool, clients, total, () =>
            runRound({ clients, opsPerClient: k, server: true, counters: counterFn(bare.counters), op: (c, i) => bareStart.run(bare.pool, writes[c * k + i]!) }),
          ),
        );
        const beforeScenarios = fresh('o', total);
        await seedReadyRuns(before.pool, beforeScenarios);
        await analyze(before.pool);
        const beforeWrites = beforeScenarios.map((s) => startWriteOf(trustedDecoded(s.startCommand()), lifecycleOf(s).state, now));
        await warm(before.pool, clients);
        push(
          `bare-before-${clients}`,
          await measured('before', before.pool, clients, total, () =>
            runRound({ clients, opsPerClient: k, server: true, counters: counterFn(before.counters), op: (c, i) => bareStartBefore.run(before.pool, beforeWrites[c * k + i]!) }),
          ),
        );

        push(`pgbench-${clients}`, await pgbenchRound(pgbenchDb.url, clients, pgbenchSeconds));
        push(`emmett-${clients}`, await peer.round(clients, k, `e${round}c${clients}`));
      }

      // A fresh deployment: the same start at 8 clients on empty tables.
      {
        const k = pgOpsFor(ctx.sizes, 8);
        const sc = fresh('z', 8 * k);
        await seedReadyRuns(empty.pool, sc);
        await analyze(empty.pool);
        const cmds = sc.map((x) => x.startCommand());
        await warm(empty.pool, 8);
        push('empty-8', await runRound({ clients: 8, opsPerClient: k, server: true, counters: counterFn(empty.counters), op: (c, i) => tolerant(() => empty.a.barriers.prepare(cmds[c * k + i]!))() }));
      }

      // Contention: 8 clients starting different StepRuns of one Run.
      const hot = 8;
      const k = pgOpsFor(ctx.sizes, hot);
      const long = longRunOf(`hot${round}`, 2 * hot * k + 1);
      await seedLongRun(product.pool, long);
      await analyze(product.pool);
      const hotCommands = long.ready.map((s, i) => s.startCommand(undefined, `s${i}-v3`));
      await warm(product.pool, hot);
      push('contention', await runRound({ clients: hot, opsPerClient: k, server: true, counters: counterFn(product.counters), op: (c, i) => tolerant(() => product.a.barriers.prepare(hotCommands[c * k + i]!))() }));

      // Stream length, one client: Runs of 10 events against Runs of 10,000 (R6.4: no fold).
      {
        const n = Math.max(10, Math.round(latencyOps / 3));
        const shortRuns = Array.from({ length: n }, (_, i) => longRunOf(`pshort${round}x${i}`, ctx.sizes.streamShort));
        for (const l of shortRuns) await seedLongRun(product.pool, l);
        const longRun = longRunOf(`plong${round}`, ctx.sizes.streamLong);
        await seedLongRun(product.pool, longRun);
        await analyze(product.pool);
        const shortCmds = shortRuns.map((l) => l.ready[0]!.startCommand(undefined, 's0-v3'));
        const longCmds = longRun.ready.slice(0, n).map((x, i) => x.startCommand(undefined, `s${i}-v3`));
        push('stream-short', await runRound({ clients: 1, opsPerClient: n, server: true, counters: counterFn(product.counters), op: (_c, i) => tolerant(() => product.a.barriers.prepare(shortCmds[i]!))() }));
        push('stream-long', await runRound({ clients: 1, opsPerClient: n, server: true, counters: counterFn(product.counters), op: (_c, i) => tolerant(() => product.a.barriers.prepare(longCmds[i]!))() }));
      }

      // Exact replay against one indexed SELECT round trip, one client.
      const replayed = fresh('r', latencyOps);
      await seedReadyRuns(product.pool, replayed);
      const replay = replayed.map((s) => s.startCommand());
      for (const c of replay) await product.a.barriers.prepare(c);
      push('replay', await runRound({ clients: 1, opsPerClient: replay.length, server: true, counters: counterFn(product.counters), op: (_c, i) => product.a.barriers.prepare(replay[i]!) }));
      push('select', await runRound({ clients: 1, opsPerClient: replay.length, server: true, counters: counterFn(product.counters), op: (_c, i) => selectBarrier(product.pool, replay[i]!.startId) }));

      // A new start's first round trip alone (the unlocked read the bare transaction never makes): its share of a start.
      const unread = fresh('u', latencyOps);
      await seedReadyRuns(product.pool, unread);
      const reads = unread.map((sc) => trustedDecoded(sc.startCommand()));
      push('read-start', await runRound({ clients: 1, opsPerClient: reads.length, server: true, counters: counterFn(product.counters), op: (_c, i) => readStart(product.pool, reads[i]!) }));
    }
    ctx.extra.pgFailuresByCode = failures.byCode;
    ctx.log('postgres: the server CPU of the database\'s own checks per start (track_functions)');
    const checks = await pgCheckShare(empty.db.url, ctx.sizes.quick ? 20 : 300);
    if (checks !== undefined) ctx.extra.pgCheckShare = checks;
    const starts1 = pgOpsFor(ctx.sizes, 1);
    ctx.bytes.push(
      { id: 'pg.bytes.prepare', label: 'PostgreSQL: prepare (new start); WAL is the cluster\'s, least of the rounds', ...leastOf(bytes.product), canonicalBytes: canonical, starts: starts1 },
      { id: 'pg.bytes.bare', label: 'PostgreSQL: bare transaction, same rows; WAL as above', ...leastOf(bytes.bare), canonicalBytes: canonical, starts: starts1 },
      { id: 'pg.bytes.bare-before', label: 'PostgreSQL: bare transaction, schema before each fact was stored once', ...leastOf(bytes.before), canonicalBytes: canonical, starts: starts1 },
    );
    for (const p of [product, empty]) {
      await p.a.close();
      await p.pool.end();
    }

    const s: Record<string, Summary> = Object.fromEntries(Object.entries(r).map(([key, v]) => [key, summarize(v)]));
    const fig = (id: string, label: string, clients: number, key: string, floorKey?: string, note?: string): Figure => ({
      id,
      section: 'postgres',
      label,
      clients,
      summary: s[key]!,
      ...(floorKey ? { floor: s[floorKey]! } : {}),
      ...(note ? { note } : {}),
    });
    for (const c of pgClients) {
      const floor = `floor-${c}`;
      ctx.figures.push(
        fig(`pg.floor.${c}`, 'PostgreSQL: commit floor (BEGIN; INSERT; COMMIT)', c, floor, floor),
        fig(`pg.pgbench.${c}`, `pgbench tpcb-like (-j 1, scale ${ctx.sizes.quick ? 1 : maxClients})`, c, `pgbench-${c}`, floor),
        fig(`pg.bare.${c}`, 'PostgreSQL: bare transaction, same rows, no checks', c, `bare-${c}`, floor),
        fig(`pg.bare-before.${c}`, 'PostgreSQL: bare transaction, same rows, schema before each fact was stored once', c, `bare-before-${c}`, floor),
        fig(`pg.emmett.${c}`, 'emmett-postgresql 0.42: append the same 5 events, expected version', c, `emmett-${c}`, floor),
        fig(`pg.prepare.${c}`, `PostgreSQL: prepare (new start, distinct Runs, ${ctx.sizes.pgHistory.toLocaleString('en-US')} stored)`, c, `prepare-${c}`, floor),
      );
    }
    ctx.figures.push(
      fig('pg.empty.8', 'PostgreSQL: prepare on empty tables (fresh deployment, no history)', 8, 'empty-8', 'floor-8'),
      fig('pg.contention', 'PostgreSQL: prepare, 8 clients on one Run', 8, 'contention', 'floor-8'),
      fig('pg.stream.short', `PostgreSQL: prepare on a Run of ${ctx.sizes.streamShort} events`, 1, 'stream-short', 'floor-1'),
      fig('pg.stream.long', `PostgreSQL: prepare on a Run of ${ctx.sizes.streamLong.toLocaleString('en-US')} events`, 1, 'stream-long', 'floor-1'),
      fig('pg.replay', 'PostgreSQL: prepare, exact replay', 1, 'replay', 'floor-1'),
      fig('pg.select', 'PostgreSQL: one indexed SELECT round trip (barrier by start_id)', 1, 'select'),
      fig('pg.read-start', "PostgreSQL: a new start's first round trip alone (the unlocked read; the bare transaction reads nothing)", 1, 'read-start', 'floor-1'),
    );
    ctx.targets.push(
      target({
        id: 'scale.stream.pg',
        text: `Flat on a Run of ${ctx.sizes.streamLong.toLocaleString('en-US')} events: ≥ 0.8× a Run of ${ctx.sizes.streamShort} (PostgreSQL)`,
        ratio: s['stream-long']!.opsPerSec / s['stream-short']!.opsPerSec,
        required: 0.8,
        detail: `${s['stream-long']!.opsPerSec.toFixed(0)} vs ${s['stream-short']!.opsPerSec.toFixed(0)} starts/s`,
        why: flatWhy(s['stream-long']!, s['stream-short']!, `the Run of ${ctx.sizes.streamShort}`),
      }),
      // Medians hide a round's failures; this counts every prepare of the section (R9.5, R5.2).
      target({
        id: 'pg.failed',
        text: 'every PostgreSQL prepare commits or replays: none ends CONCURRENCY_EXHAUSTED or otherwise (the last attempt runs alone)',
        ratio: failures.count,
        required: 0,
        lowerIsBetter: true,
        unit: ' failed',
        digits: 0,
        detail: `${failures.count} of ${failures.calls.toLocaleString('en-US')} prepare calls failed${failures.count > 0 ? ` (${Object.entries(failures.byCode).map(([code, n]) => `${code} ${n}`).join(', ')})` : ''}`,
      }),
    );
  } finally {
    await peer?.close();
    for (const p of pools) await p.end();
    for (const d of dbs) await d.drop().catch((e: unknown) => ctx.log(`could not drop ${d.name}: ${String(e)}`));
  }
};
