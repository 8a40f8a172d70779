import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Command } from 'commander';
import { buildScenario, type Scenario } from '../domain/scenario';
import { median } from './lib/stats';
import { runRound, summarize, type RoundResult } from './lib/measure';
import type { Pool } from 'pg';
import { countingPool, createDatabase, type BenchDatabase } from './postgres/admin';
import { seedLongRun, selectBarrier } from './postgres/bulk';
import { longRunOf } from './lib/longRun';

let hotRuns = 0;

// `npm run bench:compare -- --baseline DIR`: the same start workloads against two built
// checkouts of this package (a baseline, e.g. the main a change started from, and this one),
// in one process, round by round interleaved so both see the same machine, and reports
// candidate/baseline ratios of medians. Each checkout is loaded through its own
// package.json `exports`, so moved files do not matter; each gets its own fresh SQLite file
// and PostgreSQL database.

interface Authority {
  runs: { handle(c: unknown): Promise<unknown> };
  barriers: { prepare(c: unknown): Promise<{ outcome: string }> };
  recovery: { resolve(startId: string, outcome: string, options: { decidedBy: string; reason: string }): Promise<unknown> };
  close(): Promise<void>;
}

interface Subject {
  readonly label: string;
  readonly root: string;
  readonly sqlite: (path: string) => Promise<Authority>;
  readonly postgres: (pool: unknown) => Promise<Authority>;
}

const entryOf = (root: string, subpath: string): string => {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
  const exp = pkg.exports[subpath];
  const target = typeof exp === 'string' ? exp : ((exp as Record<string, unknown>)['require'] ?? (exp as Record<string, unknown>)['default']);
  const file = typeof target === 'string' ? target : ((target as Record<string, string>)['default'] ?? '');
  if (file === '') throw new Error(`${root}: no entry for ${subpath}`);
  return resolve(root, file);
};

const subjectOf = (label: string, root: string): Subject => {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const sqlite = require(entryOf(root, './sqlite')) as { openSqliteStartBarrier(o: { path: string }): Promise<Authority> };
  const postgres = require(entryOf(root, './postgres')) as { openPostgresStartBarrier(o: { pool: unknown }): Promise<Authority> };
  return {
    label,
    root,
    sqlite: (path) => sqlite.openSqliteStartBarrier({ path }),
    postgres: (pool) => postgres.openPostgresStartBarrier({ pool }),
  };
};

const readyScenario = async (a: Authority): Promise<Scenario> => {
  const s = buildScenario();
  for (const c of s.lifecycle) await a.runs.handle(c);
  return s;
};

type Workload = 'sqlite-start' | 'sqlite-replay' | 'sqlite-resolve' | 'pg-start-1' | 'pg-start-8' | 'pg-start-16' | 'pg-replay' | 'pg-resolve' | 'pg-select' | 'pg-one-run-8';

interface Open {
  readonly sqlite: Authority;
  readonly pg: Authority;
  readonly db: BenchDatabase;
  readonly pool: { end(): Promise<void>; query(sql: string): Promise<unknown> };
  readonly counters: { roundTrips: number; retries: number };
  /** prepare calls that failed in the PostgreSQL start workloads (the round goes on; each is counted). */
  readonly failures: { count: number; last?: string };
}

const program = new Command()
  .name('bench:compare')
  .requiredOption('--baseline <dir>', 'a built checkout of this package to compare against (npm run build done)')
  .option('--candidate <dir>', 'the checkout measured against the baseline', '.')
  .option('--rounds <n>', 'interleaved rounds (medians are reported)', '5')
  .option('--ops <n>', 'operations per workload and round', '200')
  .option('--only <list>', `comma-separated subset of sqlite-start,sqlite-replay,sqlite-resolve,pg-start-1,pg-start-8,pg-start-16,pg-replay,pg-resolve,pg-select,pg-one-run-8`)
  .option('--pg <url>', 'PostgreSQL admin URL', process.env.SB_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');

const main = async (): Promise<void> => {
  program.parse();
  const o = program.opts<{ baseline: string; candidate: string; rounds: string; ops: string; only?: string; pg: string }>();
  const rounds = Number(o.rounds);
  const ops = Number(o.ops);
  const all: Workload[] = ['sqlite-start', 'sqlite-replay', 'sqlite-resolve', 'pg-start-1', 'pg-start-8', 'pg-start-16', 'pg-replay', 'pg-resolve', 'pg-select', 'pg-one-run-8'];
  const workloads = o.only ? all.filter((w) => o.only!.split(',').includes(w)) : all;
  const subjects = [subjectOf('baseline', resolve(o.baseline)), subjectOf('candidate', resolve(o.candidate))];
  const tmp = mkdtempSync(join(tmpdir(), 'start-barrier-compare-'));
  const opened = new Map<string, Open>();
  const results = new Map<string, RoundResult[]>();
  const log = (m: string) => process.stderr.write(`[compare] ${m}\n`);
  try {
    for (const s of subjects) {
      const db = await createDatabase(o.pg);
      const { pool, counters } = countingPool(db.url, 16, { idleTimeoutMillis: 2000 });
      opened.set(s.label, { sqlite: await s.sqlite(join(tmp, `${s.label}.db`)), pg: await s.postgres(pool), db, pool, counters, failures: { count: 0 } });
    }
    for (let r = 0; r < rounds; r++) {
      // Alternate which checkout goes first, so neither always runs on a warmer machine.
      const order = r % 2 === 0 ? subjects : [...subjects].reverse();
      for (const w of workloads) {
        for (const s of order) {
          const a = opened.get(s.label)!;
          const res = await runWorkload(w, a, ops);
          const key = `${w}|${s.label}`;
          results.set(key, [...(results.get(key) ?? []), res]);
        }
      }
      log(`round ${r + 1}/${rounds} done`);
    }
  } finally {
    for (const a of opened.values()) {
      await a.sqlite.close().catch(() => undefined);
      await a.pg.close().catch(() => undefined);
      await a.pool.end().catch(() => undefined);
      await a.db.drop().catch(() => undefined);
    }
    rmSync(tmp, { recursive: true, force: true });
  }
  const lines = [
    `### Side by side: ${subjects[1]!.root} vs ${subjects[0]!.root}`,
    '',
    `${cpus().length} cores, load ${loadavg().map((l) => l.toFixed(2)).join(' ')}, ${rounds} interleaved rounds of ${ops} ops, medians.`,
    '',
    '| workload | baseline ops/s | candidate ops/s | ratio | baseline p50 ms | candidate p50 ms | p50 ratio | round trips/op (b → c) | client CPU µs/op (b → c) | server CPU µs/op (b → c) |',
    '|---|---:|---:|---:|---:|---:|---:|---|---|---|',
  ];
  for (const w of workloads) {
    const b = summarize(results.get(`${w}|baseline`) ?? []);
    const c = summarize(results.get(`${w}|candidate`) ?? []);
    const ratio = c.opsPerSec / b.opsPerSec;
    const rt = `${(b.perOp['roundTrips'] ?? 0).toFixed(1)} → ${(c.perOp['roundTrips'] ?? 0).toFixed(1)}`;
    const us = (ms: number | null | undefined) => (ms === undefined || ms === null ? '–' : (ms * 1000).toFixed(0));
    const cpu = `${us(b.clientCpuMsPerOp)} → ${us(c.clientCpuMsPerOp)}`;
    const server = w.startsWith('pg') ? `${us(b.serverCpuMsPerOp)} → ${us(c.serverCpuMsPerOp)}` : '';
    lines.push(`| ${w} | ${b.opsPerSec.toFixed(0)} | ${c.opsPerSec.toFixed(0)} | ${ratio.toFixed(2)}x | ${b.p50Ms.toFixed(3)} | ${c.p50Ms.toFixed(3)} | ${(c.p50Ms / b.p50Ms).toFixed(2)}x | ${w.startsWith('pg') ? rt : ''} | ${cpu} | ${server} |`);
  }
  const perRound = workloads.map((w) => {
    const b = results.get(`${w}|baseline`) ?? [];
    const c = results.get(`${w}|candidate`) ?? [];
    return `${w}: per-round ratios ${c.map((x, i) => (x.opsPerSec / (b[i]?.opsPerSec ?? NaN)).toFixed(2)).join(' ')} (median ${median(c.map((x, i) => x.opsPerSec / (b[i]?.opsPerSec ?? NaN))).toFixed(2)})`;
  });
  // Exact replay against one indexed SELECT round trip, each checkout on its own database.
  const versusSelect = workloads.includes('pg-replay') && workloads.includes('pg-select')
    ? subjects.map((s) => {
        const replay = summarize(results.get(`pg-replay|${s.label}`) ?? []).p50Ms;
        const select = summarize(results.get(`pg-select|${s.label}`) ?? []).p50Ms;
        return `${s.label}: exact replay p50 ${replay.toFixed(3)} ms = ${(replay / select).toFixed(2)}x one indexed SELECT (${select.toFixed(3)} ms)`;
      })
    : [];
  const failed = [...opened.entries()].map(([label, a]) => `${label}: ${a.failures.count} failed prepare calls${a.failures.count > 0 ? ` (${a.failures.last})` : ''}`);
  process.stdout.write(`${lines.join('\n')}\n\n${perRound.join('\n')}\n${[...versusSelect, ...failed].join('\n')}\n`);
};

/** A start that fails (CONCURRENCY_EXHAUSTED on a small fresh table, a turn not coming) is counted, and the round goes on. */
const counted = (a: Open, p: Promise<unknown>): Promise<unknown> =>
  p.catch((e: unknown) => {
    a.failures.count++;
    a.failures.last = e instanceof Error ? e.message : String(e);
  });

const RESOLVED = { decidedBy: 'bench', reason: 'tool_succeeded' };

/** The start ids of `n` fresh starts, each in doubt. */
const startedIds = async (a: Authority, n: number): Promise<string[]> => {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const cmd = (await readyScenario(a)).startCommand();
    await a.barriers.prepare(cmd);
    ids.push(cmd.startId);
  }
  return ids;
};

const runWorkload = async (w: Workload, a: Open, ops: number): Promise<RoundResult> => {
  const counters = () => ({ roundTrips: a.counters.roundTrips, retries: a.counters.retries });
  switch (w) {
    case 'sqlite-start': {
      const ss: Scenario[] = [];
      for (let i = 0; i < ops; i++) ss.push(await readyScenario(a.sqlite));
      return runRound({ clients: 1, opsPerClient: ops, op: (_c, i) => a.sqlite.barriers.prepare(ss[i]!.startCommand()) });
    }
    case 'sqlite-replay': {
      const s = await readyScenario(a.sqlite);
      const cmd = s.startCommand();
      await a.sqlite.barriers.prepare(cmd);
      return runRound({ clients: 1, opsPerClient: ops, op: () => a.sqlite.barriers.prepare(cmd) });
    }
    case 'sqlite-resolve': {
      // an outcome recorded for a start in doubt (recovery.resolve: its reads, its outcome event)
      const ids = await startedIds(a.sqlite, ops);
      return runRound({ clients: 1, opsPerClient: ops, op: (_c, i) => a.sqlite.recovery.resolve(ids[i]!, 'completed', RESOLVED) });
    }
    case 'pg-resolve': {
      const ids = await startedIds(a.pg, ops);
      return runRound({ clients: 1, opsPerClient: ops, op: (_c, i) => a.pg.recovery.resolve(ids[i]!, 'completed', RESOLVED), counters, server: [a.db.name] });
    }
    case 'pg-start-1':
    case 'pg-start-8':
    case 'pg-start-16': {
      const clients = Number(w.slice('pg-start-'.length));
      const per = Math.max(1, Math.round(ops / clients));
      const ss: Scenario[] = [];
      for (let i = 0; i < clients * per; i++) ss.push(await readyScenario(a.pg));
      await Promise.all(Array.from({ length: clients }, () => a.pool.query('SELECT 1')));
      return runRound({ clients, opsPerClient: per, op: (c, i) => counted(a, a.pg.barriers.prepare(ss[c * per + i]!.startCommand())), counters, server: [a.db.name] });
    }
    case 'pg-replay': {
      const s = await readyScenario(a.pg);
      const cmd = s.startCommand();
      await a.pg.barriers.prepare(cmd);
      return runRound({ clients: 1, opsPerClient: ops, op: () => a.pg.barriers.prepare(cmd), counters, server: [a.db.name] });
    }
    case 'pg-select': {
      const s = await readyScenario(a.pg);
      const cmd = s.startCommand();
      await a.pg.barriers.prepare(cmd);
      return runRound({ clients: 1, opsPerClient: ops, op: () => selectBarrier(a.pool as unknown as Pool, cmd.startId), counters, server: [a.db.name] });
    }
    case 'pg-one-run-8': {
      // 8 clients starting different StepRuns of one Run (the Run's writers take turns).
      const per = Math.max(1, Math.round(ops / 8));
      const long = longRunOf(`hot${++hotRuns}-${process.pid}`, 2 * 8 * per + 1);
      await seedLongRun(a.pool as unknown as Pool, long);
      const cmds = long.ready.map((s, i) => s.startCommand(undefined, `s${i}-v3`));
      await Promise.all(Array.from({ length: 8 }, () => a.pool.query('SELECT 1')));
      return runRound({ clients: 8, opsPerClient: per, op: (c, i) => counted(a, a.pg.barriers.prepare(cmds[c * per + i]!)), counters, server: [a.db.name] });
    }
  }
};

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
