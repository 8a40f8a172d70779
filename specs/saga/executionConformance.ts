import { inspect as utilInspect } from 'node:util';
import { expect } from 'chai';
import {
  CorruptRecordError,
  ExecutionRefusedError,
  PreconditionError,
  ValidationError,
  attemptIdsOf,
  invocationPlanDigest,
  type InvocationPlan,
  type StartPlan,
  type ToolAdapter,
  type ToolStepTrigger,
} from '../../domain';
import { buildScenario, type Scenario } from '../../domain/scenario';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { ExecutionAuthority, admitTicket, inspectionTicket } from '../../application/execution';
import { createToolStepSaga, openExecution } from '../../application/saga';
import { rejects } from '../../testkit/rejects';
import { PLAN_KEY_K1, PLAN_KEY_K2, TEST_PLANS } from '../../testkit/planKeys';
import { INVOCATION, SUCCEEDED, contractAdapterFor, eachOpened, planOf, type SagaBackend } from './sagaConformance';

// R12: nothing runs without a committed barrier. Execution is minted, not asserted (R12.1),
// the tool input is sealed into an encrypted plan a restarted saga re-drives from (R12.2), and
// execution stays closed until a plan store with a key is configured (R12.4). Each refusal is
// counted on the tool's side: the adapter here counts every call it receives.

const KEY_TEXTS = [PLAN_KEY_K1, PLAN_KEY_K2].flatMap((k) => [k.toString('hex'), k.toString('base64'), k.toString('latin1')]);
const expectNoKey = (text: string, what: string): void => {
  for (const k of KEY_TEXTS) expect(text.includes(k), `${what} holds a plan key`).to.equal(false);
};

export const executionConformance = (backend: SagaBackend): void => {
  describe(`R12 minted execution and sealed plans: ${backend.name}`, function () {
    this.timeout(60_000);
    const on = eachOpened(backend);

    const ready = async (): Promise<Scenario> => {
      const s = buildScenario();
      for (const c of s.lifecycle) await on.a.runs.handle(c);
      return s;
    };
    const triggerOf = (s: Scenario): ToolStepTrigger => ({ kind: 'ready', runId: s.runId, stepRunId: s.stepRunId, stepRunVersion: 2, requestedAtMs: 1_790_000_000_000 });
    /** An adapter that counts every start and inspect it receives (the tool's side). */
    const counting = (plan: StartPlan) => {
      const calls: unknown[] = [];
      const adapter: ToolAdapter = {
        ...contractAdapterFor(plan, { idempotentStart: true }, async (ticket, p) => (calls.push(['start', ticket.startId, p.input]), SUCCEEDED)),
        inspect: async (ticket) => (calls.push(['inspect', ticket.startId]), { state: 'not_started' }),
      };
      return { adapter, calls };
    };
    /** A start committed and its plan sealed, then the saga "crashes" before any claim or adapter. */
    const sealedNotRun = async (invocation: InvocationPlan = INVOCATION, redaction?: { fields: string[] }) => {
      const s = await ready();
      const base = planOf(s.startCommand());
      const plan: StartPlan = { ...base, admission: { ...base.admission, planDigest: invocationPlanDigest(invocation) } };
      const { adapter, calls } = counting(plan);
      const crash = new Error('crash after the plan was sealed');
      const saga = createToolStepSaga({ execution: on.execution, adapter, hooks: { afterSeal: () => Promise.reject(crash) }, ...(redaction === undefined ? {} : { redaction }) });
      expect(await rejects(saga.drive(triggerOf(s), plan, invocation))).to.equal(crash);
      const startId = attemptIdsOf(s.runId, s.stepRunId, 3).startId;
      return { s, plan, adapter, calls, startId };
    };

    it('R12.1 a hand-made execution object, an ExecutionAuthority made with new (it mints no ticket and opens no plan), a copy of an authority and an object built on a real execution are refused by the saga: nothing invoked, nothing written', async () => {
      const s = await ready();
      const plan = planOf(s.startCommand());
      const { adapter, calls } = counting(plan);
      const claims = on.a.driverClaims();
      try {
        const forged = [
          { authority: on.a, executionEnabled: true, claims, close: () => claims.close() },
          new (ExecutionAuthority as unknown as new (...args: unknown[]) => unknown)(on.a, { readBarrier: async () => null, outcome: async () => null, isOpen: () => true, claims: () => claims, plans: {} }, claims),
          Object.create(on.execution) as unknown,
        ];
        for (const [i, e] of forged.entries()) {
          const saga = createToolStepSaga({ execution: e as ExecutionAuthority, adapter });
          for (const attempt of [saga.drive(triggerOf(s), plan, INVOCATION), saga.resume(attemptIdsOf(s.runId, s.stepRunId, 3).startId)]) {
            const error = await rejects(attempt);
            expect(error, `forged execution ${i}`).to.be.instanceOf(ExecutionRefusedError);
            expect((error as ExecutionRefusedError).reason).to.equal('execution_disabled');
          }
        }
        // an ExecutionAuthority made with `new` mints nothing and opens no plan, whatever port it was given
        const made = forged[1] as ExecutionAuthority;
        expect(await rejects(made.ticket({ startId: 'start-any', attempt: 3, adapter: plan.contracts.adapter }))).to.include({ reason: 'execution_disabled' });
        expect(await rejects(made.openPlan({ record: { startId: 'start-any', admission: { planDigest: plan.admission.planDigest } } } as never))).to.include({ reason: 'execution_disabled' });
        const copy = await rejects(Promise.resolve().then(() => openExecution({ ...on.a } as RecoverableStartBarrierAuthority, { execution: 'enabled' })));
        expect(copy).to.include({ code: 'EXECUTION_REFUSED', reason: 'execution_disabled' });
      } finally {
        await claims.close();
      }
      expect(calls).to.deep.equal([]);
      expect(await on.a.runs.readStream(s.runId)).to.have.length(3);
      expect(await on.env.planRow(attemptIdsOf(s.runId, s.stepRunId, 3).startId)).to.equal(null);
    });

    it('R12.4 execution stays closed until a plan store with a key is configured: openExecution refuses with EXECUTION_REFUSED naming the gate', async () => {
      const bare = await backend.open(null);
      try {
        const e = await rejects(Promise.resolve().then(() => openExecution(bare.authority, { execution: 'enabled' })));
        expect(e).to.be.instanceOf(ExecutionRefusedError);
        expect((e as ExecutionRefusedError).reason).to.equal('gate_missing');
        expect(e.message).to.contain('plans.keyring');
      } finally {
        await bare.close();
      }
    });

    it('R12.1 a ticket is minted for one start, one attempt and one adapter while execution is open: copies, another adapter, another start, another attempt, a plan not opened by the library and a ticket after close() are each refused before the adapter acts', async () => {
      const first = await sealedNotRun();
      const second = await sealedNotRun();
      const ref = first.plan.contracts.adapter;
      const barrierOf = async (id: string) => (await on.a.barriers.getByStartId(id))!;
      const ticket = await on.execution.ticket({ startId: second.startId, attempt: 3, adapter: ref });
      expect(ticket).to.include({ startId: second.startId, attempt: 3, use: 'execute' });
      const plan2 = await on.execution.openPlan(await barrierOf(second.startId));
      const plan1 = await on.execution.openPlan(await barrierOf(first.startId));
      expect(admitTicket(ticket, ref, 'start', plan2)).to.equal(ticket);

      const refusals: [string, () => unknown, string][] = [
        ['a barrier-shaped object', () => admitTicket({ barrier: ticket.barrier, barrierDigest: ticket.barrierDigest, committedAtMs: ticket.committedAtMs, timeoutMs: ticket.timeoutMs }, ref, 'start', plan2), 'ticket_refused'],
        ['a copy of a ticket', () => admitTicket({ ...ticket }, ref, 'start', plan2), 'ticket_refused'],
        ['a ticket through JSON', () => admitTicket(JSON.parse(JSON.stringify(ticket)), ref, 'inspect'), 'ticket_refused'],
        ['an object built on a ticket', () => admitTicket(Object.create(ticket), ref, 'inspect'), 'ticket_refused'],
        ['another adapter', () => admitTicket(ticket, { ...ref, id: 'adapter-other' }, 'start', plan2), 'ticket_mismatch'],
        ['the plan of another start', () => admitTicket(ticket, ref, 'start', plan1), 'ticket_mismatch'],
        ['a plan the library did not open', () => admitTicket(ticket, ref, 'start', { input: INVOCATION.input }), 'plan_unavailable'],
      ];
      for (const [what, attempt, reason] of refusals) {
        const e = await rejects(Promise.resolve().then(attempt));
        expect(e, what).to.be.instanceOf(ExecutionRefusedError);
        expect((e as ExecutionRefusedError).reason, what).to.equal(reason);
      }
      // minting itself reads the committed barrier: another attempt, adapter or an unknown start is refused
      expect(await rejects(on.execution.ticket({ startId: second.startId, attempt: 4, adapter: ref }))).to.include({ reason: 'ticket_mismatch' });
      expect(await rejects(on.execution.ticket({ startId: second.startId, attempt: 3, adapter: { ...ref, id: 'adapter-other' } }))).to.include({ reason: 'ticket_mismatch' });
      expect(await rejects(on.execution.ticket({ startId: 'start-never-prepared', attempt: 3, adapter: ref }))).to.be.instanceOf(PreconditionError);
      // a ticket for an attempt that already has its outcome is never minted
      const done = await createToolStepSaga({ execution: on.execution, adapter: first.adapter }).resume(first.startId);
      expect(done).to.include({ status: 'completed', prepared: 'existing', invoked: true });
      expect(await rejects(on.execution.ticket({ startId: first.startId, attempt: 3, adapter: ref }))).to.include({ reason: 'ticket_mismatch' });
      // inspect-only tickets never start
      const readOnly = await inspectionTicket(on.a, second.startId);
      expect(await rejects(Promise.resolve().then(() => admitTicket(readOnly, ref, 'start', plan2)))).to.include({ reason: 'ticket_mismatch' });
      expect(admitTicket(readOnly, ref, 'inspect')).to.equal(readOnly);

      await on.execution.close();
      expect(await rejects(Promise.resolve().then(() => admitTicket(ticket, ref, 'start', plan2)))).to.include({ reason: 'ticket_expired' });
      expect(await rejects(on.execution.ticket({ startId: second.startId, attempt: 3, adapter: ref }))).to.include({ reason: 'ticket_expired' });
      expect(await rejects(createToolStepSaga({ execution: on.execution, adapter: second.adapter }).resume(second.startId))).to.include({ code: 'EXECUTION_REFUSED' });
      // the authority closed: its read-only tickets stop too
      await on.a.close();
      expect(await rejects(Promise.resolve().then(() => admitTicket(readOnly, ref, 'inspect')))).to.include({ reason: 'ticket_expired' });
      expect(first.calls).to.deep.equal([['start', first.startId, INVOCATION.input]]);
      expect(second.calls).to.deep.equal([]);
    });

    it('R12.2 the tool input is sealed at prepare (AES-256-GCM under a key id, outside the evidence); the preview shows only what the redaction contract names; no key reaches a row, an error, util.inspect or JSON', async () => {
      const input = { note: 'shown-field', secret: 'sealed-secret-marker-91f', nested: { a: 1, b: 'hidden-nested-b' } };
      const { s, startId, plan, calls, adapter } = await sealedNotRun({ input }, { fields: ['note', 'nested.a'] });
      const status = await on.a.plans.status(startId);
      expect(status).to.deep.equal({ status: 'sealed', preview: { redaction: plan.contracts.redaction, planDigest: plan.admission.planDigest, shown: { note: 'shown-field', 'nested.a': 1 } } });
      const row = (await on.env.planRow(startId))!;
      expect(row).to.include({ start_id: startId, plan_digest: plan.admission.planDigest, key_id: 'k1' });
      const stored = JSON.stringify(row) + Buffer.from(row.ciphertext as Uint8Array).toString('latin1');
      for (const hidden of ['sealed-secret-marker-91f', 'hidden-nested-b']) {
        expect(stored).to.not.contain(hidden);
        expect(JSON.stringify(status)).to.not.contain(hidden);
        expect(JSON.stringify(await on.a.runs.readStream(s.runId))).to.not.contain(hidden);
      }
      expectNoKey(stored, 'the plan row');
      expectNoKey(utilInspect(on.a, { depth: 8, showHidden: true }), 'util.inspect(authority)');
      expectNoKey(utilInspect(on.execution, { depth: 8, showHidden: true }) + JSON.stringify(on.execution), 'the execution authority');
      // re-driven from the stored plan alone: the adapter receives the sealed input, once
      const resumed = await createToolStepSaga({ execution: on.execution, adapter }).resume(startId);
      expect(resumed).to.include({ status: 'completed', prepared: 'existing', invoked: true });
      expect(calls).to.deep.equal([['start', startId, input]]);
      const report = await on.a.recovery.verify();
      expect(report.ok, JSON.stringify(report.problems)).to.equal(true);
      expect(report.plans).to.deep.equal({ sealed: 1, shredded: 0 });
    });

    it('R12.2 bad input writes nothing: a plan over the size limit and a redaction contract naming a field the input does not have are VALIDATION_FAILED naming it', async () => {
      const s = await ready();
      const startId = attemptIdsOf(s.runId, s.stepRunId, 3).startId;
      for (const [input, fields, path, reason] of [
        [{ blob: 'x'.repeat(1024 * 1024) }, [], 'input', 'too_large'],
        [{ note: 'n' }, ['note', 'nope'], 'redaction.fields[1]', 'invalid_value'],
      ] as const) {
        const invocation = { input };
        const base = planOf(s.startCommand());
        const plan: StartPlan = { ...base, admission: { ...base.admission, planDigest: invocationPlanDigest(invocation) } };
        const { adapter, calls } = counting(plan);
        const e = await rejects(createToolStepSaga({ execution: on.execution, adapter, redaction: { fields: [...fields] } }).drive(triggerOf(s), plan, invocation));
        expect(e, path).to.be.instanceOf(ValidationError);
        expect((e as ValidationError).issues[0]).to.include({ path, reason });
        expect(calls).to.deep.equal([]);
      }
      expect(await on.a.runs.readStream(s.runId)).to.have.length(3);
      expect(await on.env.planRow(startId)).to.equal(null);
    });

    it('R12.2 bad input writes nothing: a plan over the limit the store states (maxPlanBytes) is VALIDATION_FAILED naming the limit; a redaction contract with a field other than `fields` is refused when the saga is made', async () => {
      const small = await backend.open({ ...TEST_PLANS, maxPlanBytes: 64 });
      const onSmall = openExecution(small.authority, { execution: 'enabled' });
      try {
        const s = buildScenario();
        for (const c of s.lifecycle) await small.authority.runs.handle(c);
        const invocation = { input: { note: 'n'.repeat(64) } };
        const base = planOf(s.startCommand());
        const plan: StartPlan = { ...base, admission: { ...base.admission, planDigest: invocationPlanDigest(invocation) } };
        const { adapter, calls } = counting(plan);
        const e = await rejects(createToolStepSaga({ execution: onSmall, adapter }).drive(triggerOf(s), plan, invocation));
        expect(e).to.be.instanceOf(ValidationError);
        expect((e as ValidationError).issues[0]).to.include({ path: 'input', reason: 'too_large' });
        expect((e as ValidationError).issues[0]!.message).to.contain('over the 64-byte plan limit');
        expect(calls).to.deep.equal([]);
        expect(await small.authority.runs.readStream(s.runId)).to.have.length(3);
        expect(await small.planRow(attemptIdsOf(s.runId, s.stepRunId, 3).startId)).to.equal(null);
        const { adapter: other } = counting(plan);
        const bad = await rejects(Promise.resolve().then(() => createToolStepSaga({ execution: onSmall, adapter: other, redaction: { fields: ['note'], show: ['all'] } as never })));
        expect(bad).to.be.instanceOf(ValidationError);
        expect((bad as ValidationError).issues[0]).to.include({ path: 'redaction.show', reason: 'unknown_field' });
      } finally {
        await onSmall.close();
        await small.close();
      }
    });

    for (const [column, value] of [
      ['ciphertext', 'flip'],
      ['key_id', 'k9'],
      ['plan_digest', `sha256:${'0'.repeat(64)}`],
      ['preview_json', '{"shown":{"secret":"now shown"}}'],
    ] as const) {
      it(`R12.2 a plan whose ${column} was changed fails closed (CORRUPT_RECORD), no adapter runs from it, and verify reports it`, async () => {
        const { startId, adapter, calls } = await sealedNotRun();
        const row = (await on.env.planRow(startId))!;
        const next = value === 'flip' ? (() => { const b = Buffer.from(row.ciphertext as Uint8Array); b[0] = b[0]! ^ 1; return b; })() : value;
        await on.env.damagePlan(startId, column, next);
        const e = await rejects(createToolStepSaga({ execution: on.execution, adapter }).resume(startId));
        expect(e).to.be.instanceOf(CorruptRecordError);
        expectNoKey(e.message + JSON.stringify(e), 'the error');
        expect(calls).to.deep.equal([]);
        const report = await on.a.recovery.verify();
        expect(report.ok).to.equal(false);
        expect(report.problems.filter((p) => p.kind === 'plan').map((p) => p.record)).to.deep.equal([startId]);
      });
    }

    it('R12.2 a shredded plan is unreadable (EXECUTION_REFUSED plan_unavailable, no adapter runs) while verify stays green and counts it shredded; its preview stays', async () => {
      const { startId, adapter, calls } = await sealedNotRun();
      expect(await on.a.plans.shred(startId)).to.equal(true);
      expect(await on.a.plans.shred(startId)).to.equal(false);
      expect(await on.env.planRow(startId)).to.include({ key_id: null, nonce: null, ciphertext: null });
      expect((await on.a.plans.status(startId)).status).to.equal('shredded');
      expect(await rejects(createToolStepSaga({ execution: on.execution, adapter }).resume(startId))).to.include({ code: 'EXECUTION_REFUSED', reason: 'plan_unavailable' });
      expect(calls).to.deep.equal([]);
      const report = await on.a.recovery.verify();
      expect(report.ok, JSON.stringify(report.problems)).to.equal(true);
      expect(report.plans).to.deep.equal({ sealed: 0, shredded: 1 });
    });

    it('R12.2 rotation keeps old plans readable; a destroyed key makes its plans unreadable (shredded, verify green); a key the keyring does not hold fails closed', async function () {
      if (on.env.reopen === undefined) this.skip();
      const old = await sealedNotRun();
      const rotated = await on.env.reopen!({ keyring: { current: 'k2', keys: { k1: PLAN_KEY_K1, k2: PLAN_KEY_K2 } } });
      const newer = { ...(await sealedNotRun()) };
      try {
        const onRotated = openExecution(rotated, { execution: 'enabled' });
        expect(await createToolStepSaga({ execution: onRotated, adapter: old.adapter }).resume(old.startId)).to.include({ status: 'completed' });
        await onRotated.close();
      } finally {
        await rotated.close();
      }
      expect(old.calls).to.have.length(1);
      const destroyed = await on.env.reopen!({ keyring: { current: 'k2', keys: { k2: PLAN_KEY_K2 }, destroyed: ['k1'] } });
      try {
        expect((await destroyed.plans.status(newer.startId)).status).to.equal('shredded');
        const onDestroyed = openExecution(destroyed, { execution: 'enabled' });
        expect(await rejects(createToolStepSaga({ execution: onDestroyed, adapter: newer.adapter }).resume(newer.startId))).to.include({ reason: 'plan_unavailable' });
        await onDestroyed.close();
        const report = await destroyed.recovery.verify();
        expect(report.ok, JSON.stringify(report.problems)).to.equal(true);
        expect(report.plans).to.deep.equal({ sealed: 0, shredded: 2 });
      } finally {
        await destroyed.close();
      }
      const forgotten = await on.env.reopen!({ keyring: { current: 'k2', keys: { k2: PLAN_KEY_K2 } } });
      try {
        const onForgotten = openExecution(forgotten, { execution: 'enabled' });
        expect(await rejects(createToolStepSaga({ execution: onForgotten, adapter: newer.adapter }).resume(newer.startId))).to.be.instanceOf(CorruptRecordError);
        await onForgotten.close();
      } finally {
        await forgotten.close();
      }
      expect(newer.calls).to.deep.equal([]);
    });
  });
};
