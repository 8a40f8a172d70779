import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import fc from 'fast-check';
import {
  PreconditionError,
  ValidationError,
  canonicalJson,
  noteDigestOf,
  parseJsonBytes,
  type ToolExecutionStartCommand,
} from '../../domain';
import { Identity } from '../../domain/codecs';
import { buildScenario } from '../../domain/scenario';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { rejects } from '../../testkit/rejects';

// Hostile and careless callers, one suite run unchanged on every backend (memory, SQLite,
// PostgreSQL): strict input text (R10.1), ids that are spelled like Object.prototype's members,
// read arguments of the wrong type, and replayed responses compared byte for byte.

export interface HostileInputBackend {
  readonly name: string;
  open(): Promise<RecoverableStartBarrierAuthority>;
  /** Row count of every table, to prove a refused call wrote nothing. */
  counts(a: RecoverableStartBarrierAuthority): Promise<Record<string, number>>;
}

/** The authority, closing which also drops its fresh test database. */
export const droppingOnClose = <A extends { close(): Promise<void> }>(a: A, db: { drop(): Promise<void> }): A => {
  const close = a.close.bind(a);
  return Object.assign(a, {
    close: async () => {
      await close();
      await db.drop();
    },
  });
};

/** Every own name of Object.prototype: constructor, toString, valueOf, hasOwnProperty, __proto__, ... */
export const PROTOTYPE_NAMES: readonly string[] = Object.getOwnPropertyNames(Object.prototype);

const setUp = async (a: RecoverableStartBarrierAuthority, options: Parameters<typeof buildScenario>[0] = {}) => {
  const s = buildScenario(options);
  for (const c of s.lifecycle) await a.runs.handle(c);
  return s;
};

/** A start command whose every id of R4.1 is `name` (valid only where `name` is an Identity). */
const withIds = (c: ToolExecutionStartCommand, name: string): ToolExecutionStartCommand => ({
  ...c,
  startId: name,
  evidence: { traceId: name, spanId: name, auditEventId: `${name}-audit`, auditReceiptId: `${name}-receipt` },
  mutation: { ...c.mutation, mutationId: name, runEventId: `${name}-event` },
});

const validationOf = async (p: Promise<unknown>, path: string): Promise<ValidationError> => {
  const e = await rejects(p);
  expect(e, `${e.name}: ${e.message}`).to.be.instanceOf(ValidationError);
  const issues = (e as ValidationError).issues;
  expect(issues.map((i) => i.path), JSON.stringify(issues)).to.include(path);
  return e as ValidationError;
};

export const hostileInputConformance = (backend: HostileInputBackend): void => {
  describe(`hostile input and durable content: ${backend.name}`, function () {
    this.timeout(120_000);
    let a: RecoverableStartBarrierAuthority;
    beforeEach(async () => {
      a = await backend.open();
    });
    afterEach(() => a.close());

    describe('R10.1 input text has one meaning', () => {
      const HOSTILE: readonly (readonly [string, (text: string) => string | Uint8Array, string])[] = [
        ['a duplicate key at the root', (t) => t.replace('{', '{"startId":"other",'), 'startId'],
        ['a duplicate nested key (last one would win)', (t) => t.replace('"profile":"standard"', '"profile":"../../etc/passwd","profile":"standard"'), 'admission.profile'],
        ['a UTF-8 BOM (bytes)', (t) => new Uint8Array([0xef, 0xbb, 0xbf, ...Buffer.from(t)]), '(root)'],
        ['a BOM (text)', (t) => `\uFEFF${t}`, '(root)'],
        ['an underflowing number (1e-400 reads as 0)', (t) => t.replace('"timeoutMs":30000', '"timeoutMs":1e-400'), 'admission.timeoutMs'],
        ['excess precision (7.0000000000000001 reads as 7)', (t) => t.replace('"policyVersion":7', '"policyVersion":7.0000000000000001'), 'admission.policyFence.policyVersion'],
        ['negative zero', (t) => t.replace('"timeoutMs":30000', '"timeoutMs":-0'), 'admission.timeoutMs'],
        ['an overflowing number', (t) => t.replace('"timeoutMs":30000', '"timeoutMs":1e400'), 'admission.timeoutMs'],
        ['an integer past 2^53 (rounds to a neighbour)', (t) => t.replace('"requestedAtMs":', '"requestedAtMs":9007199254740993,"x":'), 'requestedAtMs'],
      ];
      for (const [what, change, path] of HOSTILE) {
        it(`R10.1 ${what} is VALIDATION_FAILED at ${path}; nothing is written`, async () => {
          const s = await setUp(a);
          const text = JSON.stringify(s.startCommand());
          const before = await backend.counts(a);
          const e = (() => {
            try {
              return a.barriers.prepare(parseJsonBytes('start command', change(text)) as never);
            } catch (thrown) {
              return Promise.reject(thrown);
            }
          })();
          await validationOf(e, path);
          expect(await backend.counts(a)).to.deep.equal(before);
          // the clean text of the same command is accepted: only the hostile bytes were refused
          expect((await a.barriers.prepare(parseJsonBytes('start command', Buffer.from(text)) as never)).outcome).to.equal('created');
        });
      }
    });

    describe('R4.2 a replayed response is byte-identical to the first', () => {
      it('R4.2 created, existing and every read serialise the barrier to the same bytes (same key order)', async () => {
        const s = await setUp(a, { withApproval: true });
        const command = s.startCommand();
        const created = await a.barriers.prepare(command);
        const existing = await a.barriers.prepare(JSON.parse(JSON.stringify(command)) as never);
        expect(created.outcome).to.equal('created');
        expect(existing.outcome).to.equal('existing');
        const bytes = JSON.stringify(created.barrier);
        expect(JSON.stringify(existing.barrier)).to.equal(bytes);
        expect(JSON.stringify({ ...existing, outcome: 'created' })).to.equal(JSON.stringify(created));
        expect(JSON.stringify(await a.barriers.getByStartId(command.startId))).to.equal(bytes);
        expect(JSON.stringify(await a.recovery.lookup('traceId', command.evidence.traceId))).to.equal(bytes);
        // and the record itself is in canonical order, as stored
        expect(JSON.stringify(created.barrier.record)).to.equal(canonicalJson(created.barrier.record));
      });
    });

    describe('ids are data, never property names', () => {
      it("ids drawn from Object.prototype's names: a StepRun, a start and every lookup behave as for any other id (fast-check)", async () => {
        await fc.assert(
          fc.asyncProperty(fc.constantFrom(...PROTOTYPE_NAMES), fc.constantFrom(...PROTOTYPE_NAMES), async (name, other) => {
            const runId = `run-${randomUUID()}`;
            const valid = Identity.is(name);
            if (!valid) {
              // not an Identity (`__proto__`, `__defineGetter__`): refused by path, nothing written
              const before = await backend.counts(a);
              await validationOf(a.runs.handle({ type: 'CreateStepRun', data: { runId, stepRunId: name, kind: 'tool', requestedAtMs: 1 } }), 'stepRunId');
              await validationOf(a.barriers.getByStartId(name), 'startId');
              await validationOf(a.barriers.getByStepRunAttempt(runId, name, 1), 'stepRunId');
              expect(await backend.counts(a)).to.deep.equal(before);
              return;
            }
            // a StepRun named like a prototype member is created, never a false step_run_exists
            const s = await setUp(a, { runId, stepRunId: name });
            expect((await a.runs.getStepRun(runId, name))?.status).to.equal('ready');
            // a start against a StepRun that does not exist is step_run_not_found, never project_mismatch
            if (other !== name && Identity.is(other)) {
              const missing = { ...s.startCommand(), startId: `start-${randomUUID()}`, stepRun: { ...s.startCommand().stepRun, stepRunId: other } };
              const e = await rejects(a.barriers.prepare(missing));
              expect(e, e.message).to.be.instanceOf(PreconditionError);
              expect((e as PreconditionError).reason).to.equal('step_run_not_found');
              expect(await a.barriers.getByStepRunAttempt(runId, other, 3)).to.equal(null);
              expect(await a.recovery.history(runId, other)).to.deep.equal([]);
            }
            // nothing is found under a prototype name that nothing has
            expect(await a.barriers.getByStartId(name)).to.equal(null);
            expect(await a.recovery.lookup('traceId', name)).to.equal(null);
            expect(((await rejects(a.recovery.outcome(name))) as PreconditionError).reason).to.equal('start_not_found');
            // and the start of that StepRun commits and replays like any other
            const command = s.startCommand();
            expect((await a.barriers.prepare(command)).outcome).to.equal('created');
            expect((await a.barriers.prepare(command)).outcome).to.equal('existing');
            expect((await a.barriers.getByStepRunAttempt(runId, name, 3))?.record.startId).to.equal(command.startId);
            expect((await a.recovery.history(runId, name)).map((h) => h.barrier.record.startId)).to.deep.equal([command.startId]);
          }),
          { numRuns: 16, seed: 20261201 },
        );
      });

      for (const name of PROTOTYPE_NAMES.filter((n) => Identity.is(n))) {
        it(`a start whose every R4.1 id is "${name}" commits once and is found by each id`, async () => {
          const s = await setUp(a);
          const command = withIds(s.startCommand(), name);
          expect((await a.barriers.prepare(command)).outcome).to.equal('created');
          expect((await a.barriers.prepare(command)).outcome).to.equal('existing');
          expect((await a.barriers.getByStartId(name))?.record.startId).to.equal(name);
          for (const identity of ['startId', 'traceId', 'mutationId'] as const) expect((await a.recovery.lookup(identity, name))?.record.startId).to.equal(name);
          expect((await a.recovery.verify()).ok).to.equal(true);
        });
      }
    });

    describe('read APIs validate their arguments the same way on every backend', () => {
      const BAD_IDS: readonly unknown[] = [{}, [], undefined, null, NaN, 42, '', 'a/b', 'x'.repeat(129)];
      const BAD_VERSIONS: readonly unknown[] = [NaN, undefined, null, '1', 0, -1, 1.5, Infinity, {}];

      it('getByStartId: anything but an Identity is VALIDATION_FAILED naming startId', async () => {
        for (const bad of BAD_IDS) await validationOf(a.barriers.getByStartId(bad as string), 'startId');
      });

      it('getByStepRunAttempt: each bad argument is VALIDATION_FAILED naming it', async () => {
        for (const bad of BAD_IDS) {
          await validationOf(a.barriers.getByStepRunAttempt(bad as string, 's', 1), 'runId');
          await validationOf(a.barriers.getByStepRunAttempt('r', bad as string, 1), 'stepRunId');
        }
        for (const bad of BAD_VERSIONS) await validationOf(a.barriers.getByStepRunAttempt('r', 's', bad as number), 'startedStepRunVersion');
      });

      it('recovery lookups: a bad identity, value, Run or StepRun is VALIDATION_FAILED, never a driver error or a silent null', async () => {
        for (const bad of BAD_IDS) {
          await validationOf(a.recovery.lookup('startId', bad as string), '(root)');
          await validationOf(a.recovery.outcome(bad as string), '(root)');
          await validationOf(a.recovery.history(bad as string, 's'), '[0]');
        }
        await validationOf(a.recovery.lookup('constructor' as never, 'x'), '(root)');
        for (const bad of BAD_VERSIONS) await validationOf(a.recovery.lookup('attempt', { runId: 'r', stepRunId: 's', startedStepRunVersion: bad as number }), 'startedStepRunVersion');
      });

      it('getStepRun and readStream: a bad Run or StepRun id is VALIDATION_FAILED naming it, never a silent null or []', async () => {
        for (const bad of BAD_IDS) {
          await validationOf(a.runs.getStepRun(bad as string, 's'), 'runId');
          await validationOf(a.runs.getStepRun('r', bad as string), 'stepRunId');
          await validationOf(a.runs.readStream(bad as string), 'runId');
        }
        // a well-formed id of nothing stays an answer: no StepRun, no events
        expect(await a.runs.getStepRun('r-none', 's-none')).to.equal(null);
        expect(await a.runs.readStream('r-none')).to.deep.equal([]);
      });

      it('recovery.verify: options other than an onProgress function are VALIDATION_FAILED naming the field, before any record is read', async () => {
        for (const [bad, path] of [[{ onProgress: 5 }, 'onProgress'], [{ onProgres: () => undefined }, 'onProgres'], [null, '(root)'], ['fast', '(root)']] as const) {
          await validationOf(a.recovery.verify(bad as never), path);
        }
        expect((await a.recovery.verify({ onProgress: () => undefined })).ok).to.equal(true);
      });
    });
  });
};

/** R10.2 on every backend: codes and references in the evidence, a person's note beside it. */
export const durableContentConformance = (backend: HostileInputBackend): void => {
  describe(`R10.2 durable records hold no free text: ${backend.name}`, function () {
    this.timeout(120_000);
    let a: RecoverableStartBarrierAuthority;
    beforeEach(async () => {
      a = await backend.open();
    });
    afterEach(() => a.close());

    const started = async () => {
      const s = await setUp(a);
      const created = await a.barriers.prepare(s.startCommand());
      return { s, startId: created.barrier.record.startId };
    };

    const SECRETS = [
      'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.x',
      'sk_live_4eC39HqLyjWDarjtT1zdp7dc',
      'ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ',
      '-----BEGIN PRIVATE KEY-----',
      'u:pw@db.internal:5432',
      '4111 1111 1111 1111',
      'evil.example.com/collect?k=1',
      '10.0.0.5:8080/hook',
      'tool log shows exit 0 at 02:41',
      '',
    ];

    it('R10.2 a resolution reason is a code from a closed set: free text (secrets, URLs, prose) and "" are refused by path, nothing written', async () => {
      const { startId } = await started();
      const before = await backend.counts(a);
      for (const reason of SECRETS) await validationOf(a.recovery.resolve(startId, 'lost', { decidedBy: 'ops', reason: reason as never }), 'options.reason');
      for (const ticket of ['ops-1', 'OPS-0', 'https://jira/OPS-1', 'OPS-1 and more', '']) {
        await validationOf(a.recovery.resolve(startId, 'lost', { decidedBy: 'ops', reason: 'worker_lost', ticket }), 'options.ticket');
      }
      expect(await backend.counts(a)).to.deep.equal(before);
      expect(await a.recovery.outcome(startId)).to.equal(null);
    });

    it('R10.2 a lifecycle outcome with free text is refused on the write path (runs.handle)', async () => {
      const { s } = await started();
      await validationOf(a.runs.handle({ type: 'MarkStepRunLost', data: { runId: s.runId, stepRunId: s.stepRunId, decidedBy: 'ops', reason: 'sk_live_4eC39HqLyjWDarjtT1zdp7dc', requestedAtMs: 1 } } as never), 'reason');
    });

    it('R10.2 a start command with annotations is refused (unknown field): the command binds exactly the groups of ADR-0158 §1', async () => {
      const s = await setUp(a);
      const before = await backend.counts(a);
      const e = await validationOf(a.barriers.prepare({ ...s.startCommand(), annotations: { note: 'Authorization: Bearer x' } } as never), 'annotations');
      expect(e.issues[0]?.reason).to.equal('unknown_field');
      expect(await backend.counts(a)).to.deep.equal(before);
    });

    it('R10.2 a note goes to the side record, bound by digest; purging it keeps verify green and reports "purged"', async () => {
      const { startId } = await started();
      const note = 'Called the on-call DBA (Authorization: Bearer abc, u:pw@db.internal:5432); the tool never ran.';
      const resolved = await a.recovery.resolve(startId, 'lost', { decidedBy: 'oncall-ana', reason: 'no_trace_of_tool', ticket: 'OPS-1234', note });
      expect(resolved.outcome).to.include({ reason: 'no_trace_of_tool', ticket: 'OPS-1234', noteDigest: noteDigestOf(note) });
      // the evidence holds the digest, never the text
      const events = await a.runs.readStream(resolved.outcome.runId);
      expect(JSON.stringify(events)).to.not.contain('Bearer');
      expect(JSON.stringify(events)).to.contain(noteDigestOf(note));
      expect(await a.recovery.note(startId)).to.deep.equal({ startId, noteDigest: noteDigestOf(note), status: 'present', text: note });
      expect((await a.recovery.verify()).notes).to.deep.equal({ present: 1, purged: 0 });

      const purged = await a.recovery.purgeNote(startId);
      expect(purged).to.include({ startId, noteDigest: noteDigestOf(note), status: 'purged' });
      expect(await a.recovery.note(startId)).to.deep.equal(purged);
      expect(await a.recovery.purgeNote(startId)).to.deep.equal(purged); // idempotent
      const report = await a.recovery.verify();
      expect(report.ok, JSON.stringify(report.problems)).to.equal(true);
      expect(report.notes).to.deep.equal({ present: 0, purged: 1 });
      // the outcome and its evidence are untouched
      expect(await a.recovery.outcome(startId)).to.deep.equal(resolved.outcome);
    });

    it('R10.2 an outcome without a note: note() is null, purgeNote is a typed precondition error', async () => {
      const { startId } = await started();
      await a.recovery.resolve(startId, 'completed', { decidedBy: 'saga', reason: 'tool_succeeded' });
      expect(await a.recovery.note(startId)).to.equal(null);
      expect(((await rejects(a.recovery.purgeNote(startId))) as PreconditionError).reason).to.equal('note_not_found');
    });
  });
};
