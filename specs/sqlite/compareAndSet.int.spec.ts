import { expect } from 'chai';
import { CompareAndSetLostError, ConcurrencyExhaustedError } from '../../domain';
import type { SqliteStartBarrier } from '../../infrastructure/sqlite';
import { setUp } from '../conformance/startBarrierConformance';
import { rejects } from '../../testkit/rejects';
import { openFreshSqlite, sqliteCounts } from './support';

// A compare-and-set that matches no row says so: the state the start decided on moved inside
// its transaction. It keeps CONCURRENCY_EXHAUSTED (a caller re-reads and decides again either
// way) but never claims that retries were used up.

describe('R3.4/R3.5 a lost compare-and-set is named for what happened (SQLite)', function () {
  this.timeout(60_000);

  const cases = [
    // the StepRun event is checked against its head too (0072): both guards go, or the event's
    // check, not the compare-and-set, would be what refuses the start
    { id: 'R3.4', step: 'evidence', guard: 'step_runs_legal_move; DROP TRIGGER events_step_run_from_head', move: 'UPDATE step_runs SET version = version + 1 WHERE run_id = ?', key: (runId: string) => runId, lost: /compare-and-set on StepRun .* lost/ },
    { id: 'R3.5', step: 'stepRunCas', guard: 'streams_legal_move', move: 'UPDATE streams SET version = version + 1 WHERE stream_id = ?', key: (runId: string) => `run-${runId}`, lost: /compare-and-set on stream run-.* lost/ },
  ] as const;

  for (const c of cases) {
    it(`${c.id} the head moved after ${c.step}: CompareAndSetLostError, nothing written`, async () => {
      let runId = '';
      const a: SqliteStartBarrier = await openFreshSqlite((at) => {
        // the same connection, inside the start transaction: the head moves under the start. The
        // database refuses such a move (R9.1), so the guard trigger is dropped first, inside the
        // same transaction (its rollback puts the trigger back)
        if (at !== c.step) return;
        a.db.exec(`DROP TRIGGER ${c.guard}`);
        a.db.prepare(c.move).run(c.key(runId));
      });
      try {
        const s = await setUp(a);
        runId = s.runId;
        const before = sqliteCounts(a);
        const e = await rejects(a.barriers.prepare(s.startCommand()));
        expect(e, e.message).to.be.instanceOf(CompareAndSetLostError);
        expect(e).to.be.instanceOf(ConcurrencyExhaustedError);
        expect((e as CompareAndSetLostError).code).to.equal('CONCURRENCY_EXHAUSTED');
        expect(e.message).to.match(c.lost);
        expect(e.message).to.not.match(/gave up after/);
        expect(sqliteCounts(a)).to.deep.equal(before);
      } finally {
        await a.close();
      }
    });
  }
});
