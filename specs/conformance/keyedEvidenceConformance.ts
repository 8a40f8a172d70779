import { inspect } from 'node:util';
import { expect } from 'chai';
import { CorruptRecordError, type ToolExecutionStartCommand } from '../../domain';
import type { Scenario } from '../../domain/scenario';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import type { EvidenceKey, EvidenceKeyringOptions } from '../../application/evidenceKeys';
import { setUp } from './startBarrierConformance';

// R9.4 on every backend from one source: with a deployment keyring every barrier is sealed
// (HMAC-SHA-256 over its digests, the key id stored beside it) and every verified read checks
// the seal. A barrier minted without the key (by a writer that has INSERT rights only, or
// under a key of the same id with other bytes) fails every read and `verify`; after a rotation
// the old key id still verifies; the key bytes never reach a row or an error message.

export interface KeyedStore {
  /** An authority over the one shared store, with this keyring (or none: today's behaviour). */
  open(keys?: EvidenceKeyringOptions): Promise<RecoverableStartBarrierAuthority>;
  /** Every stored row of every table, as text (to grep for key bytes). */
  dump(): Promise<string>;
  /** The owner's damage past the guards (R9.3): every seal origin row deleted; `undo` puts them back. */
  removeSealOrigins(): Promise<{ undo: () => Promise<void> }>;
  close(): Promise<void>;
}

export interface KeyedBackend {
  readonly name: string;
  create(): Promise<KeyedStore>;
}

/** Recognisable key bytes, so a leak in any encoding is found by a plain search. */
const keyOf = (id: string, fill: number): EvidenceKey => ({ id, secret: Buffer.alloc(32, fill).fill(id.charCodeAt(id.length - 1), 0, 4) });
const encodings = (k: EvidenceKey): string[] => {
  const b = Buffer.from(k.secret);
  return [b.toString('hex'), b.toString('base64'), b.toString('base64url'), b.toString('latin1'), [...b].join(',')];
};

export const keyedEvidenceSuite = (backend: KeyedBackend): void => {
  describe(`keyed evidence (R9.4): ${backend.name}`, function () {
    this.timeout(120_000);
    const k1 = keyOf('k1', 0x3c);
    const k2 = keyOf('k2', 0x5e);
    const k1Forged = keyOf('k1', 0x71); // the same id, other bytes: what a writer without the key can do
    let store: KeyedStore;
    const opened: RecoverableStartBarrierAuthority[] = [];
    const errors: unknown[] = [];

    before(async () => {
      store = await backend.create();
    });
    after(async () => {
      for (const a of opened.splice(0)) await a.close();
      await store?.close();
    });

    const open = async (keys?: EvidenceKeyringOptions) => {
      const a = await store.open(keys);
      opened.push(a);
      return a;
    };
    const started = async (a: RecoverableStartBarrierAuthority): Promise<{ s: Scenario; command: ToolExecutionStartCommand; version: number }> => {
      const s = await setUp(a);
      const command = s.startCommand();
      const r = await a.barriers.prepare(command);
      expect(r.outcome).to.equal('created');
      return { s, command, version: r.barrier.record.attempt.startedStepRunVersion };
    };
    const failsClosed = async (what: string, p: Promise<unknown>) => {
      const r = await p.then((v) => v, (e: unknown) => e);
      errors.push(r);
      expect(r instanceof CorruptRecordError, `${what}: ${r instanceof Error ? r.message : JSON.stringify(r)?.slice(0, 120)}`).to.equal(true);
    };
    const everyReadFails = async (a: RecoverableStartBarrierAuthority, t: { s: Scenario; command: ToolExecutionStartCommand; version: number }, what: string) => {
      await failsClosed(`${what}: getByStartId`, a.barriers.getByStartId(t.command.startId));
      await failsClosed(`${what}: getByStepRunAttempt`, a.barriers.getByStepRunAttempt(t.s.runId, t.s.stepRunId, t.version));
      await failsClosed(`${what}: prepare (replay)`, a.barriers.prepare(t.command));
      await failsClosed(`${what}: recovery.lookup`, a.recovery.lookup('startId', t.command.startId));
      await failsClosed(`${what}: recovery.inDoubt`, a.recovery.inDoubt({ runId: t.s.runId }));
      await failsClosed(`${what}: recovery.history`, a.recovery.history(t.s.runId, t.s.stepRunId));
      const report = await a.recovery.verify();
      expect(report.ok, `${what}: verify`).to.equal(false);
      expect(report.problems.map((p) => p.record)).to.include(t.command.startId);
      errors.push(report);
    };

    it('R9.4 with a keyring, a start is sealed and every read and verify accept it; without one, nothing changes', async () => {
      const keyed = await open({ active: k1 });
      const t = await started(keyed);
      expect((await keyed.barriers.getByStartId(t.command.startId))?.record.startId).to.equal(t.command.startId);
      expect((await keyed.barriers.prepare(t.command)).outcome).to.equal('existing');
      expect((await keyed.recovery.inDoubt({ runId: t.s.runId })).map((d) => d.startId)).to.deep.equal([t.command.startId]);
      // an unkeyed reader keeps today's behaviour (it does not check seals)
      const unkeyed = await open();
      expect((await unkeyed.barriers.getByStartId(t.command.startId))?.record.startId).to.equal(t.command.startId);
    });

    it('R9.4 a start minted without the key (INSERT rights only) fails every verified read and verify', async () => {
      const minted = await started(await open()); // a writer without the keyring: no seal
      await everyReadFails(await open({ active: k1 }), minted, 'unsealed');
    });

    it('R9.4 a start sealed under a key of the same id with other bytes fails every verified read and verify', async () => {
      // Here sealing began under k1: those bytes verify neither its seal origin nor its seals,
      // so a keyed write under them refuses to append past what it cannot verify.
      await failsClosed('a write under other bytes of k1', started(await open({ active: k1Forged })));
      // A store they wrote first: everything sealed under them, which the real k1 refuses.
      const other = await backend.create();
      const theirs: RecoverableStartBarrierAuthority[] = [];
      try {
        theirs.push(await other.open({ active: k1Forged }));
        const forged = await started(theirs[0]!);
        theirs.push(await other.open({ active: k1 }));
        await everyReadFails(theirs[1]!, forged, 'forged seal');
      } finally {
        for (const a of theirs) await a.close();
        await other.close();
      }
    });

    it('R9.3 the seal origin deleted: every keyed read and write fails closed, a Run appended without the key after it went included (it would read as legacy), and verify names it; clean once put back', async () => {
      const other = await backend.create();
      const theirs: RecoverableStartBarrierAuthority[] = [];
      try {
        theirs.push(await other.open({ active: k1 }), await other.open());
        const [keyed, unkeyed] = theirs as [RecoverableStartBarrierAuthority, RecoverableStartBarrierAuthority];
        const t = await started(keyed);
        const removed = await other.removeSealOrigins();
        const forged = await setUp(unkeyed); // INSERT rights, no key: a Run made ready, not one event sealed
        const complete = { type: 'CompleteStepRun', data: { runId: t.s.runId, stepRunId: t.s.stepRunId, decidedBy: 'orchestrator', reason: 'tool_succeeded', requestedAtMs: 2 } } as const;
        const calls: [string, () => Promise<unknown>][] = [
          ['readStream of the sealed Run', () => keyed.runs.readStream(t.s.runId)],
          ['readStream of the Run appended without the key', () => keyed.runs.readStream(forged.runId)],
          ['recovery.inDoubt', () => keyed.recovery.inDoubt({ runId: t.s.runId })],
          ['a keyed lifecycle command on the sealed Run', () => keyed.runs.handle(complete)],
          ['a keyed start on the Run appended without the key', () => keyed.barriers.prepare(forged.startCommand())],
        ];
        for (const [what, call] of calls) await failsClosed(what, call());
        const report = await keyed.recovery.verify();
        expect(report.problems.some((p) => /seal origin is missing/.test(p.problem)), JSON.stringify(report.problems).slice(0, 300)).to.equal(true);
        await removed.undo();
        expect((await keyed.runs.readStream(t.s.runId)).length).to.be.greaterThan(0);
        expect((await keyed.barriers.prepare(t.command)).outcome).to.equal('existing');
        // back in place, the origin says sealing began before that Run: it reads as unsealed, not legacy
        await failsClosed('readStream of the Run appended without the key, origin back', keyed.runs.readStream(forged.runId));
      } finally {
        for (const a of theirs) await a.close();
        await other.close();
      }
    });

    it('R9.4 rotation: a verify-only old key still reads old starts; new starts are sealed with the active key; dropping the old key fails the old starts', async () => {
      const old = await started(await open({ active: k1 }));
      const rotated = await open({ active: k2, verifyOnly: [k1] });
      expect((await rotated.barriers.getByStartId(old.command.startId))?.record.startId).to.equal(old.command.startId);
      const fresh = await started(rotated);
      const onlyNew = await open({ active: k2 });
      expect((await onlyNew.barriers.getByStartId(fresh.command.startId))?.record.startId).to.equal(fresh.command.startId);
      await failsClosed('old start without its key', onlyNew.barriers.getByStartId(old.command.startId));
      // the old key alone does not verify the new start
      await failsClosed('new start under the old key only', (await open({ active: k1 })).barriers.getByStartId(fresh.command.startId));
    });

    it('R9.4 a bad keyring is refused on open, naming the key id and never its bytes', async () => {
      const short = { id: 'short', secret: Buffer.alloc(16, 0x2a) };
      for (const keys of [{ active: short }, { active: k1, verifyOnly: [k1] }, { active: { id: 'no spaces', secret: k1.secret } }]) {
        const e = await store.open(keys).then(() => undefined, (err: unknown) => err);
        expect(e, JSON.stringify(keys.active.id)).to.be.instanceOf(RangeError);
        errors.push(e);
      }
    });

    it('R9.4 the key bytes are in no stored row, no error message, and not in the keyring as printed', async () => {
      const rows = await store.dump();
      const printed = [
        ...errors.map((e) => (e instanceof Error ? `${e.message}\n${e.stack ?? ''}\n${JSON.stringify(e)}\n${inspect(e, { depth: 6 })}` : JSON.stringify(e))),
        inspect(await open({ active: k2, verifyOnly: [k1] }), { depth: 6, showHidden: false }),
      ].join('\n');
      expect(errors.length).to.be.greaterThan(10);
      expect(rows).to.contain('k1'); // the key id is stored
      for (const k of [k1, k2, k1Forged]) {
        for (const encoded of encodings(k)) {
          expect(rows.includes(encoded), `key ${k.id} in a row`).to.equal(false);
          expect(printed.includes(encoded), `key ${k.id} in an error or print`).to.equal(false);
        }
      }
    });
  });
};
