import Database from 'better-sqlite3';
import { expect } from 'chai';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { createToolStepSaga, openExecution } from '../../application/saga';
import { buildScenario } from '../../domain/scenario';
import { attemptIdsOf } from '../../domain';
import { freshDbPath } from '../support/tmp';
import { TEST_PLANS } from '../../testkit/planKeys';
import { INVOCATION, contractAdapterFor, planOf } from '../saga/sagaConformance';

// ADR §4, one operation authority: on SQLite, execution (driver claims, sealed plans, every
// read the saga makes) goes through the authority's own connection, one operation at a time.
// The connection here is the caller's, traced statement by statement (better-sqlite3
// `verbose`), and in EXCLUSIVE locking mode: once it has written, no second connection to the
// file could read or write it, so a second connection anywhere in the path would fail the drive.

const isWrite = (sql: string): boolean => /^\s*(INSERT|UPDATE|DELETE)\b/i.test(sql);

/** The trace cut into its transactions, each from its BEGIN to its COMMIT or ROLLBACK; nothing runs outside one. */
const transactionsOf = (trace: readonly string[]): string[][] => {
  const txs: string[][] = [];
  let open: string[] | undefined;
  for (const sql of trace) {
    if (sql.startsWith('BEGIN')) {
      expect(open, `${sql} inside a transaction`).to.equal(undefined);
      txs.push((open = []));
    }
    expect(open, `${sql} outside a transaction`).to.not.equal(undefined);
    open!.push(sql);
    if (sql === 'COMMIT' || sql === 'ROLLBACK') open = undefined;
  }
  return txs;
};

describe('R12.1/R12.2/ADR §4 SQLite: one connection for the start, its sealed plan, its claims and its outcome', function () {
  this.timeout(60_000);

  it('R12.2/R12.4 a saga drive runs on one traced connection (no other connection could use the file): the start and its sealed plan in one BEGIN IMMEDIATE after a read-only lookup, each later write (claim, release, outcome) one BEGIN IMMEDIATE; an exact replay takes no write lock', async () => {
    const path = freshDbPath('one-connection');
    const trace: string[] = [];
    const db = new Database(path, { verbose: (sql) => void trace.push(String(sql)) });
    const authority = await openSqliteStartBarrier({ database: db, plans: TEST_PLANS });
    db.pragma('locking_mode = EXCLUSIVE');
    const execution = openExecution(authority, { execution: 'enabled' });
    try {
      const s = buildScenario();
      for (const c of s.lifecycle) await authority.runs.handle(c);
      const plan = planOf(s.startCommand());
      let calls = 0;
      const saga = createToolStepSaga({ execution, adapter: contractAdapterFor(plan, {}, async () => (calls++, { outcome: 'completed', code: 'tool_succeeded', outputDigest: `sha256:${'a'.repeat(64)}`, outputBytes: 1 })) });
      // the lock is now this connection's for good: a second connection cannot even read
      trace.length = 0;
      const result = await saga.drive({ kind: 'ready', runId: s.runId, stepRunId: s.stepRunId, stepRunVersion: 2, requestedAtMs: 1_790_000_000_000 }, plan, INVOCATION);
      expect(result).to.include({ status: 'completed', prepared: 'created' });
      expect(calls).to.equal(1);

      const other = new Database(path, { timeout: 0 });
      try {
        expect(() => other.prepare('SELECT count(*) FROM invocation_plans').get()).to.throw(/locked|busy/i);
      } finally {
        other.close();
      }

      // Every write the drive made is on this connection's trace, each inside a BEGIN IMMEDIATE.
      const txs = transactionsOf(trace);
      for (const tx of txs.filter((t) => t.some(isWrite))) expect([tx[0], tx.at(-1)], tx.find(isWrite)).to.deep.equal(['BEGIN IMMEDIATE', 'COMMIT']);
      // the start: one BEGIN IMMEDIATE ... COMMIT holding every fact of the start and its sealed plan,
      // after a read-only lookup that found no replay
      const starts = txs.filter((tx) => tx.some((sql) => /INTO tool_execution_start_barriers/.test(sql)));
      expect(starts, 'one start transaction').to.have.length(1);
      const start = starts[0]!;
      expect(start[0]).to.equal('BEGIN IMMEDIATE');
      expect(start.at(-1)).to.equal('COMMIT');
      expect(start.findIndex((sql) => /INTO invocation_plans/.test(sql)), 'the plan is written inside the start transaction, after the barrier').to.be.greaterThan(start.findIndex((sql) => /INTO tool_execution_start_barriers/.test(sql)));
      const lookup = txs[txs.indexOf(start) - 1]!;
      expect(lookup[0], 'the replay lookup before it').to.equal('BEGIN DEFERRED');
      expect(lookup.some((sql) => /FROM (tool_execution_start_barriers|step_run_mutations)\b/.test(sql)) && !lookup.some(isWrite)).to.equal(true);
      expect(trace.filter((sql) => /INTO invocation_plans/.test(sql)), 'the plan is written once').to.have.length(1);
      expect(txs.filter((tx) => tx.some((sql) => /INTO adapter_driver_claims/.test(sql))).map((tx) => tx[0])).to.deep.equal(['BEGIN IMMEDIATE', 'BEGIN IMMEDIATE']); // claim, release
      expect(trace.filter((sql) => sql === 'BEGIN IMMEDIATE')).to.have.length(4); // the start, claim, release, outcome
      expect(await authority.plans.status(attemptIdsOf(s.runId, s.stepRunId, 3).startId)).to.include({ status: 'sealed' });

      // an exact replay of the drive writes nothing: it finds the start and the plan committed with it
      trace.length = 0;
      const again = await saga.drive({ kind: 'ready', runId: s.runId, stepRunId: s.stepRunId, stepRunVersion: 2, requestedAtMs: 1_790_000_000_000 }, plan, INVOCATION);
      expect(again).to.include({ status: 'already_resolved', prepared: 'existing' });
      expect(trace.filter((sql) => isWrite(sql) || sql === 'BEGIN IMMEDIATE')).to.deep.equal([]);
      expect(calls).to.equal(1);

      // any written start: a read-only lookup, then exactly one BEGIN IMMEDIATE ... COMMIT; its replay: the lookup alone
      const next = buildScenario();
      for (const c of next.lifecycle) await authority.runs.handle(c);
      trace.length = 0;
      expect((await authority.barriers.prepare(next.startCommand())).outcome).to.equal('created');
      expect(transactionsOf(trace).map((tx) => [tx[0], tx.at(-1), tx.some(isWrite)])).to.deep.equal([
        ['BEGIN DEFERRED', 'COMMIT', false],
        ['BEGIN IMMEDIATE', 'COMMIT', true],
      ]);
      trace.length = 0;
      expect((await authority.barriers.prepare(next.startCommand())).outcome).to.equal('existing');
      expect(transactionsOf(trace).map((tx) => [tx[0], tx.at(-1), tx.some(isWrite)])).to.deep.equal([['BEGIN DEFERRED', 'COMMIT', false]]);
    } finally {
      await execution.close();
      await authority.close();
      db.close();
    }
  });
});
