import { expect } from 'chai';
import { CorruptRecordError } from '../../domain';
import { rejects } from '../../testkit/rejects';
import { setUp } from '../conformance/startBarrierConformance';
import { openMemoryStartBarrier } from '../../infrastructure/memory/memoryAuthority';
import { memoryDamageSession } from '../../testkit/memoryDamage';
import { headForgerySuite, removeThrough, rewriteRunThrough, rewriteThrough } from '../conformance/headForgeryConformance';

headForgerySuite({
  runHeads: false,
  name: 'in-memory',
  open: async () => {
    const authority = await openMemoryStartBarrier();
    const damage = memoryDamageSession(authority);
    return { authority, rewriteHead: rewriteThrough(damage), rewriteRunCell: rewriteRunThrough(damage), removeHead: removeThrough(damage), close: () => authority.close() };
  },
});

describe('R9.3 a Run head row deleted while its stream remains (in-memory, as the SQL stores read it)', () => {
  it('R9.3 prepare, a lifecycle move and creating the Run again are CORRUPT_RECORD, never run_not_found or a lost race, and write nothing', async () => {
    const authority = await openMemoryStartBarrier();
    const s = await setUp(authority);
    const damage = memoryDamageSession(authority);
    const [run] = await damage.rows('runs', 'run_id = ?', [s.runId]);
    await damage.remove('runs', String(run!._key));
    for (const [what, p] of [
      ['prepare', authority.barriers.prepare(s.startCommand())],
      ['MarkStepRunReady', authority.runs.handle({ type: 'MarkStepRunReady', data: { runId: s.runId, stepRunId: s.stepRunId, requestedAtMs: 1_780_000_100_000 } })],
      ['CreateRun again', authority.runs.handle(s.lifecycle[0]!)],
    ] as const) {
      const e = await rejects(p);
      expect(e instanceof CorruptRecordError, `${what}: ${e.message}`).to.equal(true);
    }
    // nothing written; and the stream itself, whose Run head is gone, reads as damage
    expect(await damage.rows('events', 'stream_id = ?', [`run-${s.runId}`])).to.have.length(s.lifecycle.length);
    expect(await rejects(authority.runs.readStream(s.runId))).to.be.instanceOf(CorruptRecordError);
    await authority.close();
  });
});
