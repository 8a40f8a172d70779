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

describe('R12.1/R12.2/ADR §4 SQLite: one connection for the start, its sealed plan, its claims and its outcome', function () {
  this.timeout(60_000);

  it('R12.2/R12.4 a saga drive runs on one traced connection (no other connection could use the file): the start and its sealed plan in one transaction begun once, each later write (claim, release, outcome) one BEGIN IMMEDIATE; an exact replay writes nothing', async () => {
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

      // Every write the drive made is on this connection's trace, each inside its own transaction.
      const begins = trace.map((sql, i) => [sql, i] as const).filter(([sql]) => sql.startsWith('BEGIN'));
      const transactionOf = (needle: RegExp): string => {
        const at = trace.findIndex((sql) => needle.test(sql));
        expect(at, String(needle)).to.be.greaterThan(-1);
        return [...begins].reverse().find(([, i]) => i < at)![0];
      };
      const writes = trace.filter((sql) => /^\s*(INSERT|UPDATE|DELETE)\b/i.test(sql));
      expect(writes.some((sql) => /INTO tool_execution_start_barriers/.test(sql)), 'the barrier').to.equal(true);
      expect(transactionOf(/INTO adapter_driver_claims/)).to.equal('BEGIN IMMEDIATE');
      // the start itself: one transaction, begun once (no retry), holding every fact of the start and its sealed plan
      const barrierAt = trace.findIndex((sql) => /INTO tool_execution_start_barriers/.test(sql));
      const startBegin = begins.filter(([, i]) => i < barrierAt).at(-1)!;
      const startCommit = trace.findIndex((sql, i) => i > startBegin[1] && sql === 'COMMIT');
      expect(trace.slice(startBegin[1], startCommit).filter((sql) => sql.startsWith('BEGIN'))).to.have.length(1);
      const planAt = trace.findIndex((sql) => /INTO invocation_plans/.test(sql));
      expect(planAt, 'the plan is written inside the start transaction').to.be.greaterThan(barrierAt).and.lessThan(startCommit);
      expect(trace.filter((sql) => /INTO invocation_plans/.test(sql)), 'the plan is written once').to.have.length(1);
      expect(begins.map(([sql]) => sql).filter((sql) => sql === 'BEGIN IMMEDIATE')).to.have.length(3); // claim, release, outcome
      expect(await authority.plans.status(attemptIdsOf(s.runId, s.stepRunId, 3).startId)).to.include({ status: 'sealed' });

      // an exact replay of the drive writes nothing: it finds the start and the plan committed with it
      trace.length = 0;
      const again = await saga.drive({ kind: 'ready', runId: s.runId, stepRunId: s.stepRunId, stepRunVersion: 2, requestedAtMs: 1_790_000_000_000 }, plan, INVOCATION);
      expect(again).to.include({ status: 'already_resolved', prepared: 'existing' });
      expect(trace.filter((sql) => /^\s*(INSERT|UPDATE|DELETE)\b/i.test(sql) || sql === 'BEGIN IMMEDIATE')).to.deep.equal([]);
      expect(calls).to.equal(1);
    } finally {
      await execution.close();
      await authority.close();
      db.close();
    }
  });
});
