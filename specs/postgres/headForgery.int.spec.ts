import { expect } from 'chai';
import { postgresDamageSession } from '../../testkit/damage';
import { createDatabase, openOn } from '../../testkit/postgresHarness';
import { headForgerySuite, moveRunHeadsThrough, removeThrough, rewriteRunThrough, rewriteThrough } from '../conformance/headForgeryConformance';
import { setUp } from '../conformance/startBarrierConformance';

headForgerySuite({
  runHeads: true,
  name: 'PostgreSQL',
  open: async () => {
    const db = await createDatabase();
    const authority = await openOn(db);
    const damage = await postgresDamageSession(db.url);
    return {
      authority,
      rewriteHead: rewriteThrough(damage),
      rewriteRunCell: rewriteRunThrough(damage),
      moveRunHeads: moveRunHeadsThrough(damage),
      removeHead: removeThrough(damage),
      close: async () => {
        await damage.close();
        await authority.close();
        await db.drop();
      },
    };
  },
});

describe('R9.3 reads beside a writer of their Run (PostgreSQL): a read that checks the log never mistakes a commit between its statements for damage', function () {
  this.timeout(120_000);
  it('R9.3 getStepRun and getByStepRunAttempt never answer CORRUPT_RECORD on a sound store while the StepRun moves and its attempts commit', async () => {
    const db = await createDatabase();
    const a = await openOn(db);
    try {
      const s = await setUp(a);
      let writing = true;
      const writer = (async () => {
        try {
          for (let i = 0; i < 8; i++) {
            const current = (await a.runs.getStepRun(s.runId, s.stepRunId))!;
            const start = s.startCommand(current, `race-${i}`);
            await a.barriers.prepare(start);
            await a.recovery.resolve(start.startId, 'lost', { decidedBy: 'race-suite', reason: 'worker_lost' });
            await a.runs.handle({ type: 'MarkStepRunReady', data: { runId: s.runId, stepRunId: s.stepRunId, requestedAtMs: start.requestedAtMs + 1 } });
          }
        } finally {
          writing = false;
        }
      })();
      let reads = 0;
      const readers = [0, 1, 2].map(async (r) => {
        for (let i = 0; writing; i++) {
          // the attempts the writer makes are at StepRun versions 3, 6, 9, ...: a read by attempt races each one's commit
          if (r === 0) await a.barriers.getByStepRunAttempt(s.runId, s.stepRunId, 3 * (1 + (i % 8)));
          else await a.runs.getStepRun(s.runId, s.stepRunId);
          reads++;
        }
      });
      await Promise.all([writer, ...readers]);
      expect(reads).to.be.greaterThan(8);
      expect((await a.runs.getStepRun(s.runId, s.stepRunId))?.status).to.equal('ready');
    } finally {
      await a.close();
      await db.drop();
    }
  });
});
