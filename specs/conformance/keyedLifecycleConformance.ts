import { expect } from 'chai';
import { CorruptRecordError } from '../../domain';
import { buildScenario, type Scenario } from '../../domain/scenario';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import type { EvidenceKey, EvidenceKeyringOptions } from '../../application/evidenceKeys';
import { setUp } from './startBarrierConformance';
import type { KeyedBackend } from './keyedEvidenceConformance';

// R9.4 over the whole Run stream, on every backend from one source: with a deployment keyring
// every transaction that appends Run events seals them. A legal lifecycle or outcome event
// appended by a writer without the key (PostgreSQL: the runtime role; the database's history
// checks accept it) fails every verified read that shows it, and `verify` reports it; after a
// rotation the old key still reads old seals; events written before the first keyed writer
// are legacy and still read and verify; without a keyring nothing changes.

export interface KeyedLifecycleBackend extends KeyedBackend {
  /** A writer with the runtime's rights and no keyring (PostgreSQL: ql3_runtime, migrate: false). */
  readonly withoutKey?: (store: Awaited<ReturnType<KeyedBackend['create']>>) => Promise<RecoverableStartBarrierAuthority>;
}

const keyOf = (id: string, fill: number): EvidenceKey => ({ id, secret: Buffer.alloc(32, fill) });

export const keyedLifecycleSuite = (backend: KeyedLifecycleBackend): void => {
  describe(`keyed evidence over the Run stream (R9.4): ${backend.name}`, function () {
    this.timeout(120_000);
    const k1 = keyOf('k1', 0x3c);
    const k2 = keyOf('k2', 0x5e);
    const opened: RecoverableStartBarrierAuthority[] = [];
    const stores: Awaited<ReturnType<KeyedBackend['create']>>[] = [];
    after(async () => {
      for (const a of opened.splice(0)) await a.close();
      for (const s of stores.splice(0)) await s.close();
    });
    const fresh = async () => {
      const store = await backend.create();
      stores.push(store);
      opened.push(await store.open()); // the owner's open migrates the store (the runtime cannot)
      const open = async (keys?: EvidenceKeyringOptions) => {
        const a = keys === undefined && backend.withoutKey !== undefined ? await backend.withoutKey(store) : await store.open(keys);
        opened.push(a);
        return a;
      };
      return open;
    };
    const running = async (a: RecoverableStartBarrierAuthority): Promise<{ s: Scenario; startId: string }> => {
      const s = await setUp(a);
      const r = await a.barriers.prepare(s.startCommand());
      return { s, startId: r.barrier.record.startId };
    };
    const complete = (a: RecoverableStartBarrierAuthority, s: Scenario, type: 'CompleteStepRun' | 'FailStepRun' = 'CompleteStepRun') =>
      a.runs.handle({ type, data: { runId: s.runId, stepRunId: s.stepRunId, decidedBy: 'orchestrator', reason: type === 'CompleteStepRun' ? 'tool_succeeded' : 'tool_failed', requestedAtMs: 2 } });
    const failsClosed = async (what: string, p: Promise<unknown>) => {
      const r = await p.then((v) => v, (e: unknown) => e);
      expect(r instanceof CorruptRecordError, `${what}: ${r instanceof Error ? r.message : JSON.stringify(r)?.slice(0, 160)}`).to.equal(true);
    };
    /** Every read that shows the forged event fails closed, and verify names its stream position. */
    const forgedIsRefused = async (a: RecoverableStartBarrierAuthority, t: { s: Scenario; startId: string }, what: string) => {
      await failsClosed(`${what}: readStream`, a.runs.readStream(t.s.runId));
      await failsClosed(`${what}: recovery.outcome`, a.recovery.outcome(t.startId));
      await failsClosed(`${what}: recovery.history`, a.recovery.history(t.s.runId, t.s.stepRunId));
      await failsClosed(`${what}: recovery.inDoubt of its Run`, a.recovery.inDoubt({ runId: t.s.runId }));
      // the forged outcome would take its start off a store-wide list: that list fails closed too
      await failsClosed(`${what}: recovery.inDoubt of the store`, a.recovery.inDoubt());
      await failsClosed(`${what}: recovery.inDoubt of its project`, a.recovery.inDoubt({ projectId: t.s.projectId }));
      const report = await a.recovery.verify();
      expect(report.ok, `${what}: verify`).to.equal(false);
      const seals = report.problems.filter((p) => p.kind === 'event_seal' && p.record.startsWith(`run-${t.s.runId}@`));
      expect(seals, `${what}: verify reports the unsealed event`).to.have.length(1);
    };

    it('R9.4 with a keyring, lifecycle, outcome and resolution events are sealed: readStream, outcome, history and verify accept them', async () => {
      const open = await fresh();
      const keyed = await open({ active: k1 });
      const done = await running(keyed);
      await complete(keyed, done.s);
      const lost = await running(keyed);
      await keyed.recovery.resolve(lost.startId, 'lost', { decidedBy: 'oncall', reason: 'checked_tool_log', requestedAtMs: 5 });
      expect((await keyed.runs.readStream(done.s.runId)).map((e) => e.event.type)).to.include('StepRunCompleted');
      expect((await keyed.recovery.outcome(done.startId))?.outcome).to.equal('completed');
      expect((await keyed.recovery.outcome(lost.startId))?.outcome).to.equal('lost');
      expect(await keyed.recovery.history(lost.s.runId, lost.s.stepRunId)).to.have.length(1);
      const report = await keyed.recovery.verify();
      expect(report.problems).to.deep.equal([]);
      expect(report.seals?.legacy).to.equal(0);
      expect(report.seals?.sealed).to.equal(report.checked.events);
      // without a keyring: the same report as before keyed evidence existed (no seal counts)
      expect((await (await open()).recovery.verify()).seals).to.equal(undefined);
    });

    for (const type of ['CompleteStepRun', 'FailStepRun'] as const) {
      it(`R9.4 a legal ${type === 'CompleteStepRun' ? 'StepRunCompleted' : 'StepRunFailed'} appended without the key fails every read that shows it, and verify reports it; an unkeyed reader sees today's behaviour`, async () => {
        const open = await fresh();
        const keyed = await open({ active: k1 });
        const t = await running(keyed);
        const forger = await open();
        await complete(forger, t.s, type); // the database accepts it: a legal transition
        await forgedIsRefused(keyed, t, type);
        expect((await forger.recovery.outcome(t.startId))?.outcome).to.equal(type === 'CompleteStepRun' ? 'completed' : 'failed');
        expect((await forger.recovery.verify()).ok).to.equal(true);
      });
    }

    it('R9.4 a resolution appended without the key (an outcome event) fails every read that shows it, and verify reports it', async () => {
      const open = await fresh();
      const keyed = await open({ active: k1 });
      const t = await running(keyed);
      const forger = await open();
      await forger.recovery.resolve(t.startId, 'completed', { decidedBy: 'intruder', reason: 'checked_tool_log', requestedAtMs: 5 });
      await forgedIsRefused(keyed, t, 'resolution');
      await failsClosed('resolve again (reads the forged outcome)', keyed.recovery.resolve(t.startId, 'completed', { decidedBy: 'oncall', reason: 'checked_tool_log' }));
    });

    it('R9.4 rotation: a verify-only old key still reads old seals; new appends are sealed with the active key; dropping the old key fails the old seals', async () => {
      const open = await fresh();
      const old = await running(await open({ active: k1 }));
      const rotated = await open({ active: k2, verifyOnly: [k1] });
      expect(await rotated.runs.readStream(old.s.runId)).to.have.length.greaterThan(0);
      await complete(rotated, old.s);
      expect((await rotated.recovery.outcome(old.startId))?.outcome).to.equal('completed');
      const fresher = await running(rotated);
      expect((await rotated.recovery.verify()).problems).to.deep.equal([]);
      const onlyNew = await open({ active: k2 });
      expect(await onlyNew.runs.readStream(fresher.s.runId)).to.have.length.greaterThan(0);
      await failsClosed('old seals without their key', onlyNew.runs.readStream(old.s.runId));
      const unreadable = (await onlyNew.recovery.verify()).problems.filter((p) => p.kind === 'event_seal' && p.record.startsWith(`run-${old.s.runId}@`));
      expect(unreadable.map((p) => p.problem).join('\n')).to.contain('which this keyring does not hold');
    });

    it('R9.4 events written before the first keyed writer are legacy: they read and verify, and only events after the seal origin need a seal', async () => {
      const open = await fresh();
      const before = await open();
      const s = await setUp(before); // a Run made ready before any keyed writer (a store of yesterday)
      const keyed = await open({ active: k1 });
      expect(await keyed.runs.readStream(s.runId)).to.have.length(s.lifecycle.length); // no origin yet: all legacy
      const r = await keyed.barriers.prepare(s.startCommand()); // the first keyed write stores the origin
      await complete(keyed, s);
      expect(await keyed.runs.readStream(s.runId)).to.have.length(s.lifecycle.length + 6);
      expect((await keyed.recovery.outcome(r.barrier.record.startId))?.outcome).to.equal('completed');
      expect(await keyed.recovery.history(s.runId, s.stepRunId)).to.have.length(1);
      const report = await keyed.recovery.verify();
      expect(report.problems).to.deep.equal([]);
      expect(report.seals).to.deep.equal({ legacy: s.lifecycle.length, sealed: 6 });
      // after the origin, an unkeyed append is not legacy
      const after = await running(keyed);
      await complete(await open(), after.s);
      await forgedIsRefused(keyed, after, 'after the origin');
    });

    /** CreateStepRun of a second StepRun of the Run: a command legal after any event of it. */
    const secondStepRunOf = (s: Scenario) => {
      const create = s.lifecycle[1]!;
      return { ...create, data: { ...create.data, stepRunId: `${s.stepRunId}-2` } } as typeof create;
    };
    /** The Run stream as an unkeyed reader sees it (the keyed reader refuses it). */
    const streamOf = async (a: RecoverableStartBarrierAuthority, runId: string) => (await a.runs.readStream(runId)).map((e) => `${e.streamPosition}:${e.event.type}`);

    it('R9.4 a keyed write does not build on an event appended without the key: a start of a StepRun made ready without it is CORRUPT_RECORD and writes nothing', async () => {
      const open = await fresh();
      const keyed = await open({ active: k1 });
      await running(keyed); // sealing has begun: the seal origin is stored
      const forger = await open();
      const s = buildScenario();
      const [ready, ...made] = [...s.lifecycle].reverse();
      for (const c of made.reverse()) await keyed.runs.handle(c); // the Run and its StepRun, sealed
      await forger.runs.handle(ready!); // ready, appended without the key: the database accepts it
      const before = await streamOf(forger, s.runId);
      await failsClosed('the start after it', keyed.barriers.prepare(s.startCommand()));
      await failsClosed('a lifecycle command after it', keyed.runs.handle(secondStepRunOf(s)));
      expect(await streamOf(forger, s.runId), 'nothing appended').to.deep.equal(before);
      expect(await forger.barriers.getByStartId(s.startCommand().startId)).to.equal(null);
      const report = await keyed.recovery.verify();
      expect(report.problems.filter((p) => p.kind === 'event_seal' && p.record.startsWith(`run-${s.runId}@`)).map((p) => p.record)).to.deep.equal([`run-${s.runId}@${before.length}`]);
    });

    it('R9.4 a keyed write does not build on an outcome appended without the key: a lifecycle command or a resolution after it is CORRUPT_RECORD and writes nothing', async () => {
      const open = await fresh();
      const keyed = await open({ active: k1 });
      const t = await running(keyed);
      const forger = await open();
      await complete(forger, t.s, 'FailStepRun');
      const before = await streamOf(forger, t.s.runId);
      await failsClosed('a lifecycle command after it', keyed.runs.handle(secondStepRunOf(t.s)));
      await failsClosed('a resolution after it', keyed.recovery.resolve(t.startId, 'lost', { decidedBy: 'oncall', reason: 'checked_tool_log', requestedAtMs: 5 }));
      expect(await streamOf(forger, t.s.runId), 'nothing appended').to.deep.equal(before);
    });

    it('R9.4 events before the seal origin are legacy to a keyed write too: a keyed start after them is accepted', async () => {
      const open = await fresh();
      const s = await setUp(await open()); // no keyed writer yet: every event is legacy
      const keyed = await open({ active: k1 });
      await running(keyed); // sealing begins on another Run
      const r = await keyed.barriers.prepare(s.startCommand()); // its head is legacy, not forged
      expect(r.outcome).to.equal('created');
      await complete(keyed, s);
      expect((await keyed.recovery.verify()).problems).to.deep.equal([]);
    });

    it('R9.4 a keyed start is a keyed write: when it is the first one, it stores the seal origin, so an unkeyed append right after it is refused', async () => {
      const open = await fresh();
      const s = await setUp(await open()); // a Run made ready before any keyed writer
      const keyed = await open({ active: k1 });
      const r = await keyed.barriers.prepare(s.startCommand()); // the only keyed write
      const t = { s, startId: r.barrier.record.startId };
      await complete(await open(), s);
      await forgedIsRefused(keyed, t, 'after a first keyed start');
    });
  });
};
