import { expect } from 'chai';
import { SemanticConflictError, ValidationError, nextStartCommand, planOfBarrier, type ToolExecutionStartCommand } from '../../domain';
import { buildScenario } from '../../domain/scenario';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { openPostgresStartBarrier } from '../../infrastructure/postgres';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { openMemoryStartBarrier } from '../../infrastructure/memory/testing';
import { createDatabase, type TestDatabase } from '../../testkit/postgresHarness';
import { rejects } from '../../testkit/rejects';
import { freshDbPath } from '../support/tmp';

// R1.4.6 R6.1: the trace anchor can carry the caller's W3C traceparent (the distributed trace a
// start belongs to). Optional, strictly formed, bound by the command digest like every other
// binding, kept in the anchor and the barrier, and re-verified on read.

const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

describe('R1.4.6 R6.1 the caller W3C traceparent in the trace anchor', function () {
  this.timeout(60_000);
  let pg: TestDatabase;
  before(async () => {
    pg = await createDatabase();
  });
  after(async () => {
    await pg.drop();
  });

  for (const [backend, open] of [
    ['memory', () => openMemoryStartBarrier()],
    ['sqlite', () => openSqliteStartBarrier({ path: freshDbPath('traceparent') })],
    ['postgres', () => openPostgresStartBarrier({ connectionString: pg.url })],
  ] as const) {
    it(`R1.4.6 ${backend}: a start with a traceparent keeps it in the anchor and the barrier; replay, conflict and verify treat it as a binding`, async () => {
      const authority: RecoverableStartBarrierAuthority = await open();
      try {
        const s = buildScenario();
        for (const c of s.lifecycle) await authority.runs.handle(c);
        const plain = s.startCommand();
        const command: ToolExecutionStartCommand = { ...plain, evidence: { ...plain.evidence, traceparent: TRACEPARENT } };

        const created = await authority.barriers.prepare(command);
        expect(created.outcome).to.equal('created');
        expect(created.barrier.record.trace.traceparent).to.equal(TRACEPARENT);
        const anchor = (await authority.runs.readStream(s.runId)).find((e) => e.event.type === 'TraceAnchorRecorded');
        expect((anchor?.event.data as { traceparent?: string }).traceparent).to.equal(TRACEPARENT);
        expect((await authority.barriers.getByStartId(command.startId))?.record.trace.traceparent).to.equal(TRACEPARENT);

        expect((await authority.barriers.prepare(command)).outcome, 'exact replay').to.equal('existing');
        const other = { ...command, evidence: { ...command.evidence, traceparent: '00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01' } };
        expect(await rejects(authority.barriers.prepare(other)), 'same ids, another traceparent').to.be.instanceOf(SemanticConflictError);
        expect(await rejects(authority.barriers.prepare(plain)), 'same ids, no traceparent').to.be.instanceOf(SemanticConflictError);
        expect((await authority.recovery.verify()).ok).to.equal(true);

        // The next attempt's builder passes it through.
        await authority.recovery.resolve(command.startId, 'lost', { decidedBy: 'spec', reason: 'worker_lost' });
        await authority.runs.handle({ type: 'MarkStepRunReady', data: { runId: s.runId, stepRunId: s.stepRunId, requestedAtMs: command.requestedAtMs + 1 } });
        const stepRun = (await authority.runs.getStepRun(s.runId, s.stepRunId))!;
        const retry = nextStartCommand(planOfBarrier(created.barrier.record), stepRun, command.requestedAtMs + 2, { traceparent: TRACEPARENT });
        expect((await authority.barriers.prepare(retry)).barrier.record.trace.traceparent).to.equal(TRACEPARENT);
      } finally {
        await authority.close();
      }
    });
  }

  it('R1.4.6 a malformed traceparent is a typed validation error naming evidence.traceparent, writing nothing', async () => {
    const authority = await openMemoryStartBarrier();
    const s = buildScenario();
    for (const c of s.lifecycle) await authority.runs.handle(c);
    const before = (await authority.runs.readStream(s.runId)).length;
    const plain = s.startCommand();
    for (const bad of [
      '01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      '00-00000000000000000000000000000000-b7ad6b7169203331-01',
      '00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01',
      '00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01',
      '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra',
      '',
    ]) {
      const e = await rejects(authority.barriers.prepare({ ...plain, evidence: { ...plain.evidence, traceparent: bad } }));
      expect(e, bad).to.be.instanceOf(ValidationError);
      expect((e as ValidationError).issues.map((i) => i.path), bad).to.deep.equal(['evidence.traceparent']);
    }
    expect((await authority.runs.readStream(s.runId)).length).to.equal(before);
  });
});
