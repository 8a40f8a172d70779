import { isDeepStrictEqual } from 'node:util';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { buildScenario } from '../../domain/scenario';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { checkStartRows } from '../../application/checks/checkRows';
import { verifyStartRows, type StoredStartRows } from '../../application/checks/verifyRows';
import { sqliteRaw } from '../../testkit/rawSql';
import { readStartRows } from '../../testkit/startRows';
import type { BenchContext } from '../lib/context';
import { runSyncRound, summarize, type RoundResult } from '../lib/measure';
import { SqliteWriter } from './bulk';

// R5.3's price per read: CPU to verify one barrier with its five facts, its four fact rows and
// its seven replay identities, on rows read back from a real SQLite file, by the verifier every
// read path uses (one pass) and by the one it replaced (the oracle), side by side and
// interleaved. The rows are read beforehand, so only verification is timed.

export const verificationCost = async (ctx: BenchContext): Promise<void> => {
  const n = ctx.sizes.quick ? 60 : 1_000;
  const path = join(ctx.tmp, 'verify-cost.db');
  const a = await openSqliteStartBarrier({ path, synchronous: 'NORMAL' });
  const scenarios = Array.from({ length: n }, (_, i) => buildScenario({ withApproval: i % 2 === 1 }));
  new SqliteWriter(a.db as Database.Database).readyRuns(scenarios);
  const ids: string[] = [];
  for (const s of scenarios) ids.push((await a.barriers.prepare(s.startCommand())).barrier.record.startId);
  await a.close();
  const raw = sqliteRaw(path, { readonly: true });
  const rows: StoredStartRows[] = [];
  for (const id of ids) rows.push(await readStartRows(raw, id));
  await raw.close();

  // Same verdict and value on every stored start, or the figure means nothing.
  let mismatches = 0;
  for (const r of rows) if (!isDeepStrictEqual(checkStartRows(r), verifyStartRows(r))) mismatches++;
  const passes = ctx.sizes.quick ? 2 : 5;
  const round = (verify: (r: StoredStartRows) => unknown): RoundResult => {
    for (let i = 0; i < Math.min(n, 200); i++) verify(rows[i]!); // warm
    return runSyncRound(n * passes, (i) => verify(rows[i % n]!));
  };
  const r: Record<'check' | 'oracle', RoundResult[]> = { check: [], oracle: [] };
  for (let k = 0; k < ctx.sizes.rounds; k++) {
    ctx.log(`verification cost round ${k + 1}/${ctx.sizes.rounds}`);
    const order: ('check' | 'oracle')[] = k % 2 === 0 ? ['check', 'oracle'] : ['oracle', 'check'];
    for (const which of order) r[which].push(round(which === 'check' ? checkStartRows : verifyStartRows));
  }
  ctx.extra.verificationCost = { barriers: n, passes, mismatches };
  if (mismatches > 0) throw new Error(`the one-pass verifier and the oracle disagree on ${mismatches} stored starts`);
  ctx.figures.push(
    {
      id: 'verify.check',
      section: 'verify',
      label: 'Verification per barrier + 5 facts + rows, one pass (every read path)',
      clients: 1,
      summary: summarize(r.check),
    },
    {
      id: 'verify.oracle',
      section: 'verify',
      label: 'Verification per barrier + 5 facts + rows, the previous verifier (the oracle)',
      clients: 1,
      summary: summarize(r.oracle),
    },
  );
};

/** `recovery.verify()` of a whole store, once: every barrier, outcome, Run, StepRun and event. */
export const verifyWholeStore = async (ctx: BenchContext, a: { recovery: { verify(o?: { onProgress?: (done: number, total: number) => void }): Promise<{ ok: boolean; checked: { barriers: number }; problems: readonly unknown[] }> } }, label: string, id: string): Promise<void> => {
  let lastLog = 0;
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const report = await a.recovery.verify({
    onProgress: (done, total) => {
      if (performance.now() - lastLog < 15_000) return;
      lastLog = performance.now();
      ctx.log(`  verify: ${done.toLocaleString('en-US')}/${total.toLocaleString('en-US')}`);
    },
  });
  const elapsedMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const ops = report.checked.barriers;
  ctx.extra[id] = { checked: report.checked, problems: report.problems.length, elapsedMs };
  const perOp = elapsedMs / ops;
  ctx.figures.push({
    id,
    section: 'verify',
    label,
    clients: 1,
    note: `ops/s = barriers/s; latency = mean per barrier${report.ok ? '' : `; ${report.problems.length} problems reported`}`,
    summary: summarize([{ ops, elapsedMs, opsPerSec: (ops * 1000) / elapsedMs, p50Ms: perOp, p99Ms: perOp, clientCpuMsPerOp: (cpu.user + cpu.system) / 1000 / ops, serverCpuMsPerOp: null, perOp: {} }]),
  });
};
