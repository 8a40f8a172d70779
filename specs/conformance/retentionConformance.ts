import { expect } from 'chai';
import {
  PreconditionError,
  SemanticConflictError,
  StartCompactedError,
  ValidationError,
  type CompactReport,
  type ToolExecutionStartCommand,
} from '../../domain';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { setUp } from './startBarrierConformance';
import type { Scenario } from '../../testkit/domainFixtures';

// R14.2 on every backend: which Runs `compact` takes, what a compacted Run still answers, and
// that `verify` stays green. The backend gives the runtime authority and the operator's compact.

export interface RetentionStore {
  readonly authority: RecoverableStartBarrierAuthority;
  /** The operator's `compact` (memory: the authority's; SQL: the retention path). */
  compact(options: unknown): Promise<CompactReport>;
  close(): Promise<void>;
}

export interface RetentionBackend {
  readonly name: string;
  open(): Promise<RetentionStore>;
}

const rejection = (p: Promise<unknown>): Promise<unknown> => p.then((v) => v, (e: unknown) => e);

export const retentionSuite = (backend: RetentionBackend): void => {
  describe(`R14.2 retention and compaction: ${backend.name}`, function () {
    this.timeout(60_000);
    let store: RetentionStore;
    let done: Scenario, inDoubt: Scenario, ready: Scenario, claimed: Scenario;
    let doneStart: ToolExecutionStartCommand, claimedStart: ToolExecutionStartCommand;
    const a = () => store.authority;

    beforeEach(async () => {
      store = await backend.open();
      done = await setUp(a());
      doneStart = done.startCommand();
      await a().barriers.prepare(doneStart);
      await a().recovery.resolve(doneStart.startId, 'completed', { decidedBy: 'retention-suite', reason: 'tool_succeeded' });
      inDoubt = await setUp(a());
      await a().barriers.prepare(inDoubt.startCommand());
      ready = await setUp(a());
      claimed = await setUp(a());
      claimedStart = claimed.startCommand();
      await a().barriers.prepare(claimedStart);
      await a().recovery.resolve(claimedStart.startId, 'failed', { decidedBy: 'retention-suite', reason: 'tool_failed' });
      const claims = a().driverClaims();
      await claims.claim(claimedStart.startId, 'driver-1', 300_000);
      await claims.close();
    });
    afterEach(async () => {
      await store?.close();
    });

    const future = () => Date.now() + 3_600_000;

    it('R14.2 given finished and unfinished Runs, when compact runs before a date after them, then only the finished Run with no live claim is compacted and each other Run is kept with its reason', async () => {
      const report = await store.compact({ before: future() });
      expect(report.compacted.map((c) => c.runId)).to.deep.equal([done.runId]);
      expect(report.compacted[0]!.starts).to.equal(1);
      expect(report.compacted[0]!.compactionDigest).to.match(/^sha256:[0-9a-f]{64}$/);
      const kept = Object.fromEntries(report.kept.map((k) => [k.runId, k.reason]));
      expect(kept).to.deep.equal({ [inDoubt.runId]: 'step_run_not_terminal', [ready.runId]: 'step_run_not_terminal', [claimed.runId]: 'live_driver_claim' });
      const again = await store.compact({ before: future() });
      expect(again.compacted).to.deep.equal([]);
    });

    it('R14.2 given a finished Run, when compact runs before a date it finished after, then nothing is compacted', async () => {
      const report = await store.compact({ before: '2001-01-01' });
      expect(report.compacted).to.deep.equal([]);
      expect(report.kept.find((k) => k.runId === done.runId)?.reason).to.equal('finished_after_cutoff');
      expect(await a().barriers.getByStartId(doneStart.startId)).to.not.equal(null);
    });

    it('R14.2 given a compacted Run, then verify is green, its start reads as absent, and its stream is empty', async () => {
      await store.compact({ before: future() });
      const report = await a().recovery.verify();
      expect(report.problems, JSON.stringify(report.problems)).to.deep.equal([]);
      expect(report.ok).to.equal(true);
      expect(await a().barriers.getByStartId(doneStart.startId)).to.equal(null);
      expect(await a().runs.readStream(done.runId)).to.deep.equal([]);
      // the Runs kept still read whole
      expect(await a().barriers.getByStartId(claimedStart.startId)).to.not.equal(null);
    });

    it('R14.2 given a compacted start, when it is replayed exactly, then the answer is the typed START_COMPACTED, never created', async () => {
      const compacted = await store.compact({ before: future() });
      const e = await rejection(a().barriers.prepare(doneStart));
      expect(e).to.be.instanceOf(StartCompactedError);
      expect((e as StartCompactedError).code).to.equal('START_COMPACTED');
      expect((e as StartCompactedError).runId).to.equal(done.runId);
      expect((e as StartCompactedError).compactionDigest).to.equal(compacted.compacted[0]!.compactionDigest);
    });

    it('R14.2 given a compacted start, when another command reuses any of its identities, then it is refused as a conflict', async () => {
      await store.compact({ before: future() });
      const other = await setUp(a());
      const fresh = other.startCommand();
      const reuse = { ...fresh, evidence: { ...fresh.evidence, traceId: doneStart.evidence.traceId } };
      const e = await rejection(a().barriers.prepare(reuse));
      expect(e, String(e)).to.be.instanceOf(SemanticConflictError);
      expect((e as SemanticConflictError).identity).to.equal('traceId');
      const drifted = await rejection(a().barriers.prepare({ ...doneStart, requestedAtMs: doneStart.requestedAtMs + 1 }));
      expect(drifted, String(drifted)).to.be.instanceOf(SemanticConflictError);
    });

    it('R14.2 given a compacted Run, when its run id is created again, then it is refused as run_compacted', async () => {
      await store.compact({ before: future() });
      const e = await rejection(a().runs.handle(done.lifecycle[0]!));
      expect(e, String(e)).to.be.instanceOf(PreconditionError);
      expect((e as PreconditionError).reason).to.equal('run_compacted');
    });

    it('R14.2 bad compact options are a ValidationError naming the field, and nothing is compacted', async () => {
      for (const bad of [{}, { before: 'yesterday' }, { before: -1 }, { before: 1.5 }, { before: '2026-13-45' }, { before: future(), runId: 'x' }, null, 'x']) {
        const e = await rejection(store.compact(bad));
        expect(e, JSON.stringify(bad)).to.be.instanceOf(ValidationError);
      }
      expect(await a().barriers.getByStartId(doneStart.startId)).to.not.equal(null);
    });
  });
};
