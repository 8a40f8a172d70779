import { buildScenario } from '../../domain/scenario';
import type { ToolExecutionStartCommand } from '../../domain';
import { DEFAULT_TIMEOUTS, openPostgresStartBarrier, type PostgresStartBarrier } from '../../infrastructure/postgres';
import { stepRunsOfOneRun } from '../../testkit/stepRunsOfOneRun';
import type { BenchContext } from '../lib/context';
import { countingPool, createDatabase } from './admin';

// R13.1 under contention: 16 writers on one Run, on PostgreSQL. Per start: the write
// transactions it began (every BEGIN, lost turns included; the bound is 1 + 3), the round trips
// it sent, and its latency (p50, p99), with how each start ended. Two cases: 16 different
// StepRuns of one Run started at once (writes that must take turns), and one command sent by
// 16 writers at once (one write, fifteen exact replays). `npm run bench -- --only contention`.

const WRITERS = 16;

interface CaseResult {
  readonly label: string;
  readonly starts: number;
  readonly writeTxPerStart: number;
  readonly mostWriteTx: number;
  readonly roundTripsPerStart: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly ends: Record<string, number>;
}

const quantile = (sorted: readonly number[], q: number): number => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? 0;

/** Runs both cases and returns their table (markdown). */
export const contentionSection = async (ctx: BenchContext, adminUrl: string): Promise<string> => {
  const rounds = ctx.sizes.quick ? 2 : 12;
  const db = await createDatabase(adminUrl);
  const { pool, counters } = countingPool(db.url, WRITERS, {
    statement_timeout: DEFAULT_TIMEOUTS.statementMs,
    lock_timeout: DEFAULT_TIMEOUTS.lockMs,
    idle_in_transaction_session_timeout: DEFAULT_TIMEOUTS.idleInTransactionMs,
  });
  let begins = 0;
  let most = 0;
  let a: PostgresStartBarrier | undefined;
  try {
    a = await openPostgresStartBarrier({ pool, hooks: { onAttempt: (k) => void ((begins += 1), (most = Math.max(most, k))) } });
    const authority = a;
    const s = buildScenario();
    for (const c of s.lifecycle) await authority.runs.handle(c);
    const stepRuns = (n: number, tag: string): Promise<ToolExecutionStartCommand[]> => stepRunsOfOneRun(authority, s, n, tag);
    const measure = async (label: string, batches: readonly (readonly ToolExecutionStartCommand[])[]): Promise<CaseResult> => {
      const times: number[] = [];
      const ends: Record<string, number> = {};
      const rt0 = counters.roundTrips;
      begins = 0;
      most = 0;
      for (const batch of batches) {
        await Promise.all(Array.from({ length: WRITERS }, () => pool.query('SELECT 1'))); // every writer's connection open
        await Promise.all(
          batch.map(async (command) => {
            const t = performance.now();
            const end = await authority.barriers.prepare(command).then((r) => r.outcome, (e: { code?: string }) => e.code ?? 'error');
            times.push(performance.now() - t);
            ends[end] = (ends[end] ?? 0) + 1;
          }),
        );
      }
      const warmUps = batches.length * WRITERS; // the SELECT 1 that opens each writer's connection
      const starts = times.length;
      times.sort((x, y) => x - y);
      return {
        label,
        starts,
        writeTxPerStart: begins / starts,
        mostWriteTx: most,
        roundTripsPerStart: (counters.roundTrips - rt0 - warmUps) / starts,
        p50Ms: quantile(times, 0.5),
        p99Ms: quantile(times, 0.99),
        ends,
      };
    };
    ctx.log(`contention: ${WRITERS} writers on one Run, ${rounds} rounds of each case`);
    const distinct: ToolExecutionStartCommand[][] = [];
    for (let r = 0; r < rounds; r++) distinct.push(await stepRuns(WRITERS, `d${r}-`));
    const one: ToolExecutionStartCommand[][] = [];
    for (const c of await stepRuns(rounds, 'o')) one.push(Array.from({ length: WRITERS }, () => c));
    const results = [await measure(`${WRITERS} writers, ${WRITERS} StepRuns of one Run`, distinct), await measure(`${WRITERS} writers, one command (exact replays)`, one)];
    ctx.extra.contention = results;
    const row = (r: CaseResult) =>
      `| ${r.label} | ${r.starts} | ${r.writeTxPerStart.toFixed(2)} (most ${r.mostWriteTx}) | ${r.roundTripsPerStart.toFixed(2)} | ${r.p50Ms.toFixed(1)} | ${r.p99Ms.toFixed(1)} | ${Object.entries(r.ends)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')} |`;
    return [
        `PostgreSQL under contention (R13.1): ${WRITERS} writers on one Run, one authority, a pool of ${WRITERS}; per start`,
        '',
        '| case | starts | write transactions (bound 4) | round trips | p50 ms | p99 ms | ended |',
        '|---|---:|---:|---:|---:|---:|---|',
        ...results.map(row),
      ].join('\n');
  } finally {
    await a?.close();
    await pool.end();
    await db.drop();
  }
};
