import { join } from 'node:path';
import Database from 'better-sqlite3';
import { buildScenario, type Scenario } from '../domain/scenario';
import { invocationPlanDigest, outputDigestOf, type InvocationPlan, type StartPlan, type ToolAdapter, type ToolStepTrigger } from '../domain';
import { createToolStepSaga, openExecution } from '../application/saga';
import type { RecoverableStartBarrierAuthority } from '../application/authority';
import { openSqliteStartBarrier } from '../infrastructure/sqlite';
import { openPostgresStartBarrier } from '../infrastructure/postgres/postgresAuthority';
import { TEST_PLANS } from '../testkit/planKeys';
import type { BenchContext } from './lib/context';
import { runRound, summarize, type Counters, type RoundResult } from './lib/measure';
import { countingPool, createDatabase } from './postgres/admin';

// `--only drive`: one saga drive per start, what a caller of the execution path pays per tool
// call: the start with its sealed invocation plan (R12.2), the claim, the adapter (a no-op
// here), the outcome and the release; then an exact replay of each drive. Per drive: the
// latency, the CPU on both sides, and the transactions (SQLite: BEGINs on the one connection)
// or round trips (PostgreSQL: queries on the pool) it took. Built only from the public saga
// API, so the same file measures any version of the product side by side.

const INVOCATION: InvocationPlan = { input: { note: 'a bench tool input' } };

const planOf = (s: Scenario): StartPlan => {
  const c = s.startCommand();
  return { project: c.project, toolDefinition: c.toolDefinition, handlerBinding: c.handlerBinding, admission: { ...c.admission, planDigest: invocationPlanDigest(INVOCATION) }, contracts: c.contracts };
};

const triggerOf = (s: Scenario): ToolStepTrigger => ({ kind: 'ready', runId: s.runId, stepRunId: s.stepRunId, stepRunVersion: 2, requestedAtMs: 1_790_000_000_000 }) as ToolStepTrigger;

const noopAdapter = (plan: StartPlan): ToolAdapter => ({
  declaration: { kind: plan.admission.executionClass, ref: plan.contracts.adapter, guarantees: { idempotentStart: false, enforcesTimeout: true } },
  start: async () => ({ outcome: 'completed', code: 'tool_succeeded', ...outputDigestOf('done') }),
});

/** `rounds` rounds of `ops` drives of fresh starts, then the same drives again (exact replays). */
const driveRounds = async (ctx: BenchContext, a: RecoverableStartBarrierAuthority, ops: number, counters: () => Counters): Promise<{ created: RoundResult[]; replay: RoundResult[] }> => {
  const execution = openExecution(a, { execution: 'enabled' });
  const created: RoundResult[] = [];
  const replay: RoundResult[] = [];
  try {
    for (let r = 0; r < ctx.sizes.rounds; r++) {
      const scenarios = Array.from({ length: ops }, () => buildScenario());
      for (const s of scenarios) for (const c of s.lifecycle) await a.runs.handle(c);
      const plan = planOf(scenarios[0]!);
      const saga = createToolStepSaga({ execution, adapter: noopAdapter(plan) });
      const drive = async (s: Scenario, status: string) => {
        const result = await saga.drive(triggerOf(s), planOf(s), INVOCATION);
        if (result.status !== status) throw new Error(`a bench drive ended ${result.status}, expected ${status}`);
      };
      created.push(await runRound({ clients: 1, opsPerClient: ops, server: a.backend === 'postgres', counters, op: (_c, i) => drive(scenarios[i]!, 'completed') }));
      replay.push(await runRound({ clients: 1, opsPerClient: ops, server: a.backend === 'postgres', counters, op: (_c, i) => drive(scenarios[i]!, 'already_resolved') }));
    }
  } finally {
    await execution.close();
  }
  return { created, replay };
};

const push = (ctx: BenchContext, backend: 'sqlite' | 'postgres', r: { created: RoundResult[]; replay: RoundResult[] }, per: string): void => {
  const name = backend === 'sqlite' ? 'SQLite' : 'PostgreSQL';
  const created = summarize(r.created);
  const replay = summarize(r.replay);
  ctx.figures.push(
    { id: `${backend}.drive.created`, section: 'drive', label: `${name}: saga drive of a new start (start + sealed plan, claim, outcome, release)`, clients: 1, summary: created, note: `round trips = ${per}` },
    { id: `${backend}.drive.replay`, section: 'drive', label: `${name}: saga drive, exact replay of a resolved start`, clients: 1, summary: replay, note: `round trips = ${per}` },
  );
  const fmt = (s: typeof created) => `p50 ${s.p50Ms.toFixed(3)} ms, ${s.opsPerSec.toFixed(0)}/s, client CPU ${(s.clientCpuMsPerOp * 1000).toFixed(0)} µs, ${per} ${(s.perOp.roundTrips ?? 0).toFixed(2)}`;
  ctx.log(`  ${name} drive, new start: ${fmt(created)}`);
  ctx.log(`  ${name} drive, exact replay: ${fmt(replay)}`);
};

export const driveSection = async (ctx: BenchContext, adminUrl: string): Promise<void> => {
  const ops = ctx.sizes.quick ? 20 : 200;
  ctx.log(`drive (SQLite): ${ctx.sizes.rounds} rounds of ${ops} saga drives, then their replays`);
  // the caller's connection, traced: every BEGIN on it is one transaction of a drive
  let begins = 0;
  const db = new Database(join(ctx.tmp, 'drive.db'), { verbose: (sql) => void (String(sql).startsWith('BEGIN') && begins++) });
  const lite = await openSqliteStartBarrier({ database: db, plans: TEST_PLANS });
  try {
    push(ctx, 'sqlite', await driveRounds(ctx, lite, ops, () => ({ roundTrips: begins })), 'BEGINs/drive');
  } finally {
    await lite.close();
    db.close();
  }
  ctx.log(`drive (PostgreSQL): ${ctx.sizes.rounds} rounds of ${ops} saga drives, then their replays`);
  const pg = await createDatabase(adminUrl);
  try {
    const { pool, counters } = countingPool(pg.url, 4);
    const a = await openPostgresStartBarrier({ pool, plans: TEST_PLANS });
    try {
      push(ctx, 'postgres', await driveRounds(ctx, a, ops, () => ({ roundTrips: counters.roundTrips, retries: counters.retries })), 'queries/drive');
    } finally {
      await a.close();
      await pool.end();
    }
  } finally {
    await pg.drop();
  }
};
