import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { expect } from 'chai';
import {
  ExecutionRefusedError,
  PreconditionError,
  SemanticConflictError,
  ValidationError,
  attemptIdsOf,
  invocationPlanDigest,
  outputDigestOf,
  type AdapterGuarantees,
  type AdapterReport,
  type ExecutionTicket,
  type InspectReport,
  type InvocationPlan,
  type StartPlan,
  type ToolAdapter,
  type ToolExecutionStartCommand,
  type ToolStepTrigger,
} from '../../domain';
import { buildScenario, type Scenario } from '../../domain/scenario';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import type { StoredBarrier } from '../../domain/records';
import { createToolStepSaga, openExecution, type ExecutionAuthority, type ToolStepSagaOptions } from '../../application/saga';
import { rejects } from '../../testkit/rejects';
import { openedPlanOf, type PlanStoreOptions } from '../../application/invocationPlans';
import { planKeyEnv } from '../../testkit/planKeys';
import { nodeArgsOf } from '../../testkit/workerProcess';

// The orchestration saga against real authorities. The adapter is the only test double here (the
// real process, HTTP and MCP adapters have their own suite, specs/adapters): it meets the
// contract, records each start and, when called, proves the start already committed by
// reading the barrier through a separate read (another connection where the backend has one).

export interface SagaBackend {
  readonly name: string;
  /** `plans`: the authority's plan store options (default: a keyed one; null: none, R12.4). */
  open(plans?: PlanStoreOptions | null): Promise<{
    authority: RecoverableStartBarrierAuthority;
    /** `getByStartId` through another connection to the same store (or the same store where there is only one). */
    separateRead(startId: string): Promise<StoredBarrier | null>;
    /** Where a child process finds the same store: `--db PATH` or `--postgres URL`. */
    target?: { readonly kind: 'sqlite' | 'postgres'; readonly location: string };
    /** The stored plan row as the backend holds it, and a change to one of its cells past the database's guards. */
    planRow(startId: string): Promise<Record<string, unknown> | null>;
    damagePlan(startId: string, column: 'ciphertext' | 'key_id' | 'plan_digest' | 'preview_json', value: unknown): Promise<void>;
    /** Another authority on the same store with other plan options (rotation, a destroyed key); absent in memory. */
    reopen?(plans: PlanStoreOptions): Promise<RecoverableStartBarrierAuthority>;
    close(): Promise<void>;
  }>;
}

/** The tool input every saga spec admits: the plan's planDigest binds it (R11.3). */
export const INVOCATION: InvocationPlan = { input: { note: 'an admitted tool input' } };

export const planOf = (c: ToolExecutionStartCommand, over: { timeoutMs?: number } = {}): StartPlan => ({
  project: c.project,
  toolDefinition: c.toolDefinition,
  handlerBinding: c.handlerBinding,
  admission: { ...c.admission, planDigest: invocationPlanDigest(INVOCATION), ...(over.timeoutMs === undefined ? {} : { timeoutMs: over.timeoutMs }) },
  contracts: c.contracts,
});

export const SUCCEEDED: AdapterReport = { outcome: 'completed', code: 'tool_succeeded', ...outputDigestOf('done') };

/** A minimal contracted adapter for the plan's execution class and reviewed adapter. */
export const contractAdapterFor = (plan: StartPlan, guarantees: Partial<AdapterGuarantees> = {}, start: ToolAdapter['start'] = async () => SUCCEEDED): ToolAdapter => ({
  declaration: { kind: plan.admission.executionClass, ref: plan.contracts.adapter, guarantees: { idempotentStart: false, enforcesTimeout: true, ...guarantees } },
  start,
});


/** The one test double: meets the contract, records starts, checks the barrier is durable before "acting". */
export class RecordingAdapter implements ToolAdapter {
  readonly calls: ExecutionTicket[] = [];
  readonly sawCommitted: boolean[] = [];
  readonly declaration: ToolAdapter['declaration'];
  readonly inspect?: (ticket: ExecutionTicket) => Promise<InspectReport>;
  readonly tickets: ExecutionTicket[] = [];
  constructor(
    private readonly separateRead: (startId: string) => Promise<StoredBarrier | null>,
    private readonly behave: (start: ExecutionTicket, n: number) => Promise<AdapterReport> = async () => SUCCEEDED,
    options: { readonly guarantees?: Partial<AdapterGuarantees>; readonly inspect?: (startId: string) => Promise<InspectReport>; readonly plan?: StartPlan } = {},
  ) {
    const plan = options.plan ?? planOf(buildScenario().startCommand());
    this.declaration = contractAdapterFor(plan, { idempotentStart: true, ...options.guarantees }).declaration;
    const inspect = options.inspect;
    if (inspect) this.inspect = async (ticket) => (this.tickets.push(ticket), inspect(ticket.startId));
  }
  async start(context: ExecutionTicket, plan: InvocationPlan): Promise<AdapterReport> {
    // what runs is the plan the library opened from the sealed one, for this ticket's start
    expect(openedPlanOf(plan)?.startId).to.equal(context.startId);
    expect(plan.input).to.deep.equal(INVOCATION.input);
    this.tickets.push(context);
    const durable = await this.separateRead(context.barrier.startId);
    this.sawCommitted.push(durable !== null && durable.barrierDigest === context.barrierDigest);
    this.calls.push(context);
    return this.behave(context, this.calls.length);
  }
}

/** For each spec of the block: the backend opened, with an execution authority on it; both closed after it. */
export const eachOpened = (backend: SagaBackend): { env: Awaited<ReturnType<SagaBackend['open']>>; a: RecoverableStartBarrierAuthority; execution: ExecutionAuthority } => {
  const on = {} as ReturnType<typeof eachOpened>;
  beforeEach(async () => {
    on.env = await backend.open();
    on.a = on.env.authority;
    on.execution = openExecution(on.a, { execution: 'enabled' });
  });
  afterEach(async () => {
    await on.execution.close();
    await on.env.close();
  });
  return on;
};

export const sagaConformance = (backend: SagaBackend): void => {
  describe(`orchestration saga: ${backend.name}`, function () {
    this.timeout(60_000);
    const on = eachOpened(backend);
    const createSaga = (o: Omit<ToolStepSagaOptions, 'execution'> & { execution?: ExecutionAuthority }) => {
      const saga = createToolStepSaga({ execution: on.execution, ...o });
      // hostile triggers too: the saga still decodes what it is given
      return { drive: (trigger: unknown, plan: StartPlan) => saga.drive(trigger as ToolStepTrigger, plan, INVOCATION) };
    };

    const ready = async (options: Parameters<typeof buildScenario>[0] = {}) => {
      const s = buildScenario(options);
      for (const c of s.lifecycle) await on.a.runs.handle(c);
      return s;
    };
    const triggerOf = (s: Scenario, over: Partial<ToolStepTrigger> = {}): ToolStepTrigger =>
      (s.approval
        ? { kind: 'approval_granted', runId: s.runId, stepRunId: s.stepRunId, stepRunVersion: 2, requestedAtMs: 1_790_000_000_000, approval: s.approval, ...over }
        : { kind: 'ready', runId: s.runId, stepRunId: s.stepRunId, stepRunVersion: 2, requestedAtMs: 1_790_000_000_000, ...over }) as ToolStepTrigger;
    const adapter = (behave?: ConstructorParameters<typeof RecordingAdapter>[1], options?: ConstructorParameters<typeof RecordingAdapter>[2]) => new RecordingAdapter(on.env.separateRead, behave, options);

    it('R3.8: ready -> prepare -> the adapter, once, only after the start committed -> the outcome recorded as a fact', async () => {
      const s = await ready();
      const port = adapter();
      const result = await createSaga({ adapter: port, sagaId: 'saga-7' }).drive(triggerOf(s), planOf(s.startCommand()));
      expect(result).to.include({ status: 'completed', prepared: 'created', invoked: true });
      expect(port.calls).to.have.length(1);
      expect(port.sawCommitted).to.deep.equal([true]);
      expect(port.calls[0]!.barrier).to.deep.equal(result.barrier.record);
      expect(result.barrier.record.startId).to.equal(attemptIdsOf(s.runId, s.stepRunId, 3).startId);
      if (result.status !== 'completed') throw new Error('unreachable');
      expect(result.outcome).to.include({ outcome: 'completed', decidedBy: 'saga-7', reason: 'tool_succeeded', stepRunVersion: 4, outcomeDigest: SUCCEEDED.outputDigest });
      expect(await on.a.recovery.inDoubt()).to.deep.equal([]);
      expect((await on.a.runs.getStepRun(s.runId, s.stepRunId))?.status).to.equal('completed');
      const types = (await on.a.runs.readStream(s.runId)).map((e) => e.event.type);
      expect(types.slice(-2)).to.deep.equal(['ToolExecutionStartBarrierCommitted', 'StepRunCompleted']);
    });

    it('R1.4.4: an approval_granted trigger starts from waiting_approval with the exact approval; a failing tool is recorded as failed', async () => {
      const s = await ready({ withApproval: true });
      const failed: AdapterReport = { outcome: 'failed', code: 'tool_failed', ...outputDigestOf('exit 2') };
      const port = adapter(async () => failed);
      const result = await createSaga({ adapter: port }).drive(triggerOf(s), planOf(s.startCommand()));
      expect(result).to.include({ status: 'failed', prepared: 'created' });
      expect(result.barrier.record.approval).to.deep.equal(s.approval);
      expect(result.barrier.record.attempt.fromStatus).to.equal('waiting_approval');
      expect(port.sawCommitted).to.deep.equal([true]);
      expect(await on.a.recovery.outcome(result.barrier.record.startId)).to.include({ outcome: 'failed', reason: 'tool_failed', outcomeDigest: failed.outputDigest });
    });

    describe('never when prepare fails', () => {
      const expectUntouched = async (s: Scenario, port: RecordingAdapter, streamLength: number) => {
        expect(port.calls).to.have.length(0);
        expect(await on.a.runs.readStream(s.runId)).to.have.length(streamLength);
        expect(await on.a.recovery.inDoubt()).to.deep.equal([]);
      };

      it('R1.5: a validation failure (forbidden content in the plan) never reaches the adapter', async () => {
        const s = await ready();
        const port = adapter();
        const base = planOf(s.startCommand());
        const plan = { ...base, admission: { ...base.admission, profile: 'https://example.org/x' } };
        expect(await rejects(createSaga({ adapter: port }).drive(triggerOf(s), plan))).to.be.instanceOf(ValidationError);
        expect(await rejects(createSaga({ adapter: port }).drive({ ...triggerOf(s), input: 'x' }, planOf(s.startCommand())))).to.be.instanceOf(ValidationError);
        await expectUntouched(s, port, 3);
      });

      it('R2.2: a precondition failure (stale version, wrong status, missing StepRun, other project) never reaches the adapter', async () => {
        const s = await ready();
        const port = adapter();
        const saga = createSaga({ adapter: port });
        const plan = planOf(s.startCommand());
        for (const [trigger, p, reason] of [
          [triggerOf(s, { stepRunVersion: 1 }), plan, 'version_mismatch'],
          [{ ...triggerOf(s), kind: 'approval_granted', approval: { approvalRequestId: 'ar-1', dispatchId: 'd-1', approvalDigest: plan.admission.planDigest } }, plan, 'status_mismatch'],
          [triggerOf(s, { stepRunId: 'no-such-step' }), plan, 'step_run_not_found'],
          [triggerOf(s), { ...plan, project: { ...plan.project, projectId: 'other-project' } }, 'project_mismatch'],
        ] as const) {
          const error = await rejects(saga.drive(trigger, p));
          expect(error, reason).to.be.instanceOf(PreconditionError);
          expect((error as PreconditionError).reason).to.equal(reason);
        }
        await expectUntouched(s, port, 3);
      });

      it('R4.3: a semantic conflict (another start holds the attempt; a racing replica with other content) never reaches the adapter', async () => {
        const s = await ready();
        const port = adapter();
        const saga = createSaga({ adapter: port });
        // A replica already committed this attempt with its own trigger time: same ids, other content.
        const winner = await saga.drive(triggerOf(s, { requestedAtMs: 1 }), planOf(s.startCommand()));
        expect(port.calls).to.have.length(1);
        const drift = await rejects(saga.drive(triggerOf(s, { requestedAtMs: 2 }), planOf(s.startCommand())));
        expect(drift).to.be.instanceOf(SemanticConflictError);
        expect((drift as SemanticConflictError).identity).to.equal('startId');
        expect(port.calls).to.have.length(1);
        expect(winner.status).to.equal('completed');

        const other = await ready();
        await on.a.barriers.prepare(other.startCommand()); // a start that did not come from the saga holds attempt v3
        const held = await rejects(saga.drive(triggerOf(other), planOf(other.startCommand())));
        expect(held).to.be.instanceOf(SemanticConflictError);
        expect(port.calls).to.have.length(1);
      });
    });

    describe('never twice for one attempt', () => {
      it('R4.2: a replayed trigger after the outcome was recorded is an exact replay: existing, no second invocation', async () => {
        const s = await ready();
        const port = adapter();
        const saga = createSaga({ adapter: port });
        const first = await saga.drive(triggerOf(s), planOf(s.startCommand()));
        const length = (await on.a.runs.readStream(s.runId)).length;
        for (let i = 0; i < 3; i++) {
          const replay = await saga.drive(JSON.parse(JSON.stringify(triggerOf(s))), planOf(s.startCommand()));
          expect(replay).to.include({ status: 'already_resolved', prepared: 'existing', invoked: false });
          expect(replay.barrier).to.deep.equal(first.barrier);
        }
        expect(port.calls).to.have.length(1);
        expect(await on.a.runs.readStream(s.runId)).to.have.length(length);
      });

      it('issue 5: an attempt an operator resolved (lost) is never invoked by a replay; the retry at the new version is invoked once', async () => {
        const s = await ready();
        const crashed = adapter(async () => {
          throw new Error('worker connection reset before the tool started');
        });
        const saga = (port: RecordingAdapter) => createSaga({ adapter: port });
        const first = await saga(crashed).drive(triggerOf(s), planOf(s.startCommand()));
        expect(first).to.include({ status: 'in_doubt', invoked: true });
        await on.a.recovery.resolve(first.barrier.record.startId, 'lost', { decidedBy: 'ops', reason: 'no_trace_of_tool' });
        const port = adapter();
        expect(await saga(port).drive(triggerOf(s), planOf(s.startCommand()))).to.include({ status: 'already_resolved', invoked: false });
        expect(port.calls).to.have.length(0);
        const { runVersion: _v, events } = await on.a.runs.handle({ type: 'MarkStepRunReady', data: { runId: s.runId, stepRunId: s.stepRunId, requestedAtMs: 5 } });
        const readyAgain = events[0]!.event;
        if (readyAgain.type !== 'StepRunReady') throw new Error('unreachable');
        const retry = await saga(port).drive(triggerOf(s, { stepRunVersion: readyAgain.data.stepRunVersion }), planOf(s.startCommand()));
        expect(retry).to.include({ status: 'completed', prepared: 'created' });
        expect(retry.barrier.record.attempt.startedStepRunVersion).to.equal(6);
        expect(port.calls).to.have.length(1);
        expect((await on.a.recovery.history(s.runId, s.stepRunId)).map((h) => [h.attempt, h.outcome?.outcome])).to.deep.equal([
          [3, 'lost'],
          [6, 'completed'],
        ]);
      });

      it('issue 5: an unknown adapter outcome (it threw) leaves the start in doubt; a replay resumes it (existing, no outcome) and records once', async () => {
        const s = await ready();
        const flaky = adapter(async (_start, n) => {
          if (n === 1) throw new Error('adapter lost its connection');
          return SUCCEEDED;
        });
        const saga = createSaga({ adapter: flaky });
        const first = await saga.drive(triggerOf(s), planOf(s.startCommand()));
        expect(first).to.include({ status: 'in_doubt', prepared: 'created' });
        expect((await on.a.recovery.inDoubt()).map((e) => e.startId)).to.deep.equal([first.barrier.record.startId]);
        const resumed = await saga.drive(triggerOf(s), planOf(s.startCommand()));
        expect(resumed).to.include({ status: 'completed', prepared: 'existing' });
        expect(await saga.drive(triggerOf(s), planOf(s.startCommand()))).to.include({ status: 'already_resolved', invoked: false });
        expect(flaky.calls.map((c) => c.barrier.startId)).to.deep.equal([first.barrier.record.startId, first.barrier.record.startId]);
        expect(flaky.sawCommitted).to.deep.equal([true, true]);
      });

      it('issue 5: an invalid adapter report records nothing and leaves the start in doubt', async () => {
        const s = await ready();
        const port = adapter(async () => ({ ...SUCCEEDED, code: 'see /var/log/tool.log' }) as unknown as AdapterReport);
        const result = await createSaga({ adapter: port }).drive(triggerOf(s), planOf(s.startCommand()));
        expect(result).to.include({ status: 'in_doubt' });
        if (result.status !== 'in_doubt') throw new Error('unreachable');
        expect(result.error?.code).to.equal('VALIDATION_FAILED');
        expect(await on.a.recovery.inDoubt()).to.have.length(1);
      });

      it('issue 5: an operator decision made while the adapter ran stands; the saga does not overwrite it', async () => {
        const s = await ready();
        const port = adapter(async (start) => {
          await on.a.recovery.resolve(start.barrier.startId, 'lost', { decidedBy: 'oncall', reason: 'worker_lost' });
          return SUCCEEDED;
        });
        const result = await createSaga({ adapter: port }).drive(triggerOf(s), planOf(s.startCommand()));
        expect(result).to.include({ status: 'already_resolved', invoked: true });
        if (result.status !== 'already_resolved') throw new Error('unreachable');
        expect(result.outcome).to.include({ outcome: 'lost', decidedBy: 'oncall' });
      });
    });

    it('R11.2/R12.2: a saga killed at the adapter (after commit, plan sealed, claim taken) leaves an in-doubt start; the next driver re-drives it from the stored plan alone (resume), waits out the lease, inspects, and invokes once', async () => {
      const s = await ready();
      const plan = planOf(s.startCommand(), { timeoutMs: 1000 });
      if (on.env.target === undefined) {
        // No second process can share an in-memory store: the saga is abandoned instead, stuck
        // in its adapter forever (its process "killed" there), and a new saga instance takes over.
        let reached!: () => void;
        const atPort = new Promise<void>((resolve) => (reached = resolve));
        const stuck = contractAdapterFor(plan, {}, () => (reached(), new Promise<never>(() => undefined)));
        void createSaga({ adapter: stuck, leaseGraceMs: 0 }).drive(triggerOf(s), plan);
        await atPort;
      } else {
        const child = spawnSync(process.execPath, [...nodeArgsOf(join(__dirname, 'crashChild.ts')), on.env.target.kind, on.env.target.location, JSON.stringify(triggerOf(s)), JSON.stringify(plan)], {
          cwd: join(__dirname, '..', '..'),
          env: { ...process.env, ...planKeyEnv() },
          encoding: 'utf8',
          timeout: 60_000,
        });
        expect(child.signal, child.stderr).to.equal('SIGKILL');
        expect(child.stdout).to.contain('committed');
      }
      const startId = attemptIdsOf(s.runId, s.stepRunId, 3).startId;
      const [doubt, ...more] = await on.a.recovery.inDoubt({ runId: s.runId });
      expect(more).to.have.length(0);
      expect(doubt).to.include({ runId: s.runId, stepRunId: s.stepRunId, attempt: 3, startId });
      expect((await on.a.runs.getStepRun(s.runId, s.stepRunId))?.status).to.equal('running');
      expect((await on.execution.claims.history(startId)).map((c) => [c.generation, c.released])).to.deep.equal([[1, false]]);
      const inspected: string[] = [];
      const port = adapter(undefined, { guarantees: { idempotentStart: false }, inspect: async (id) => (inspected.push(id), { state: 'not_started' }) });
      // No trigger, no StartPlan, no tool input: the barrier and the sealed plan are all it has.
      let resumed = await createToolStepSaga({ execution: on.execution, adapter: port }).resume(startId);
      // The dead driver's lease (timeout + grace) runs out on the database clock; bounded wait.
      for (let i = 0; i < 100 && resumed.status === 'claimed_elsewhere'; i++) {
        await new Promise((r) => setTimeout(r, 100));
        resumed = await createToolStepSaga({ execution: on.execution, adapter: port }).resume(startId);
      }
      expect(resumed).to.include({ status: 'completed', prepared: 'existing', invoked: true, via: 'start' });
      expect(inspected).to.deep.equal([startId]);
      expect(port.calls).to.have.length(1);
      expect(await on.a.recovery.inDoubt()).to.deep.equal([]);
      expect((await on.execution.claims.history(startId)).map((c) => [c.generation, c.released])).to.deep.equal([[1, false], [2, true]]);
    });

    describe('R11.2: one driver per attempt, inspect before invoking again', () => {
      it('R11.2/R10.1 a claim of a start with no barrier is PRECONDITION_FAILED start_not_found, a release of a malformed claim or a history of a malformed start id VALIDATION_FAILED; nothing written', async () => {
        const s = await ready();
        const startId = (await on.a.barriers.prepare(s.startCommand())).barrier.record.startId;
        const claims = on.a.driverClaims();
        try {
          const unknown = await rejects(claims.claim(`${startId}-never-prepared`, 'driver-1', 60_000));
          expect(unknown).to.be.instanceOf(PreconditionError);
          expect(unknown).to.include({ code: 'PRECONDITION_FAILED', reason: 'start_not_found' });
          expect(unknown.message).to.contain(`${startId}-never-prepared`);
          expect(await claims.history(`${startId}-never-prepared`)).to.deep.equal([]);
          for (const bad of [42, 'a/b', '']) expect(await rejects(claims.history(bad as never)), String(bad)).to.be.instanceOf(ValidationError);
          const held = await claims.claim(startId, 'driver-1', 60_000);
          if (held.status !== 'claimed') throw new Error('the claim was not taken');
          for (const [bad, path] of [
            [{ ...held.claim, generation: -1 }, 'generation'],
            [{ ...held.claim, driverId: 'not an id' }, 'driverId'],
            [{ ...held.claim, extra: true }, 'extra'],
            [null, 'claim'],
          ] as const) {
            const e = await rejects(claims.release(bad as never));
            expect(e, JSON.stringify(bad)).to.be.instanceOf(ValidationError);
            expect(e.message).to.contain(path);
          }
          expect((await claims.history(startId)).map((c) => [c.generation, c.released])).to.deep.equal([[1, false]]);
          await claims.release(held.claim);
          expect((await claims.history(startId)).map((c) => [c.generation, c.released])).to.deep.equal([[1, true]]);
        } finally {
          await claims.close();
        }
      });

      it('R11.2: two drivers racing one attempt: one invokes, the other reports the claim held (never a second invocation)', async () => {
        const s = await ready();
        let release!: () => void;
        const gate = new Promise<void>((r) => (release = r));
        const port = adapter(async () => (await gate, SUCCEEDED));
        const first = createSaga({ adapter: port, sagaId: 'replica-a' }).drive(triggerOf(s), planOf(s.startCommand()));
        while (port.calls.length === 0) await new Promise((r) => setTimeout(r, 5));
        const second = await createSaga({ adapter: port, sagaId: 'replica-b' }).drive(triggerOf(s), planOf(s.startCommand()));
        expect(second).to.include({ status: 'claimed_elsewhere', invoked: false, prepared: 'existing' });
        if (second.status !== 'claimed_elsewhere') throw new Error('unreachable');
        expect(second.holder.driverId).to.match(/^replica-a\./);
        release();
        expect(await first).to.include({ status: 'completed', invoked: true });
        expect(port.calls).to.have.length(1);
        expect(await createSaga({ adapter: port }).drive(triggerOf(s), planOf(s.startCommand()))).to.include({ status: 'already_resolved', invoked: false });
      });

      it('R11.2: after an unknown outcome, an adapter with inspect is asked first: succeeded is recorded without invoking again', async () => {
        const s = await ready();
        const port = adapter(async () => {
          throw new Error('response lost after the tool acted');
        }, { guarantees: { idempotentStart: false }, inspect: async () => ({ state: 'succeeded', ...outputDigestOf('late answer') }) });
        const saga = createSaga({ adapter: port });
        expect(await saga.drive(triggerOf(s), planOf(s.startCommand()))).to.include({ status: 'in_doubt', why: 'start_unknown', invoked: true });
        const resumed = await saga.drive(triggerOf(s), planOf(s.startCommand()));
        expect(resumed).to.include({ status: 'completed', via: 'inspect', invoked: false });
        expect(port.calls).to.have.length(1);
        expect(await on.a.recovery.outcome(resumed.barrier.record.startId)).to.include({ reason: 'inspected_succeeded', outcomeDigest: outputDigestOf('late answer').outputDigest });
      });

      it('R11.2: an adapter with neither inspect nor idempotent starts gets at-most-once: the attempt stays in doubt for manual recovery', async () => {
        const s = await ready();
        const port = adapter(async () => {
          throw new Error('connection reset');
        }, { guarantees: { idempotentStart: false } });
        const saga = createSaga({ adapter: port });
        const first = await saga.drive(triggerOf(s), planOf(s.startCommand()));
        expect(first).to.include({ status: 'in_doubt', why: 'start_unknown' });
        for (let i = 0; i < 2; i++) expect(await saga.drive(triggerOf(s), planOf(s.startCommand()))).to.include({ status: 'in_doubt', why: 'no_inspect', invoked: false });
        expect(port.calls).to.have.length(1);
        expect((await on.a.recovery.inDoubt()).map((d) => d.startId)).to.deep.equal([first.barrier.record.startId]);
      });

      it('R11.2: inspect saying running or unknown (without idempotent starts) never invokes again', async () => {
        for (const state of ['running', 'unknown'] as const) {
          const s = await ready();
          const port = adapter(async () => {
            throw new Error('timed out');
          }, { guarantees: { idempotentStart: false }, inspect: async () => ({ state }) });
          const saga = createSaga({ adapter: port });
          await saga.drive(triggerOf(s), planOf(s.startCommand()));
          expect(await saga.drive(triggerOf(s), planOf(s.startCommand()))).to.include({ status: 'in_doubt', why: `inspect_${state}`, invoked: false });
          expect(port.calls).to.have.length(1);
        }
      });
    });

    describe('R11.3: execution stays gated', () => {
      it('R11.3: without execution enabled, or with an adapter that does not meet the contract, nothing is invoked and nothing is written', async () => {
        const s = await ready();
        const port = adapter();
        const plan = planOf(s.startCommand());
        const refusals = [
          await rejects(createToolStepSaga({ adapter: port } as unknown as ToolStepSagaOptions).drive(triggerOf(s), plan, INVOCATION)),
          await rejects(Promise.resolve().then(() => openExecution(on.a, {} as never))),
          await rejects(createSaga({ adapter: { start: port.start.bind(port) } as unknown as ToolAdapter }).drive(triggerOf(s), plan)),
          await rejects(createSaga({ adapter: contractAdapterFor({ ...plan, contracts: { ...plan.contracts, adapter: { ...plan.contracts.adapter, id: 'unreviewed' } } }) }).drive(triggerOf(s), plan)),
          await rejects(createToolStepSaga({ execution: on.execution, adapter: port }).drive(triggerOf(s), plan, { input: 'not what admission saw' })),
        ];
        expect(refusals.map((e) => (e as ExecutionRefusedError).reason)).to.deep.equal(['execution_disabled', 'execution_disabled', 'adapter_contract_unmet', 'adapter_mismatch', 'plan_mismatch']);
        for (const e of refusals) expect(e).to.be.instanceOf(ExecutionRefusedError);
        expect(port.calls).to.have.length(0);
        expect(await on.a.runs.readStream(s.runId)).to.have.length(3);
        expect(await on.a.recovery.inDoubt()).to.deep.equal([]);
      });

      it('R10.1 the saga and execution options have one meaning: an unknown option or hook, a clock or hook that is not a function, claims that are not a claims store, and a clock that gives no epoch milliseconds are VALIDATION_FAILED naming it; nothing is invoked or written', async () => {
        const s = await ready();
        const port = adapter();
        const plan = planOf(s.startCommand());
        const atConstruction: [Record<string, unknown>, string][] = [
          [{ leaseGraceMS: 60_000 }, 'leaseGraceMS'],
          [{ clock: 1_790_000_000_000 }, 'clock'],
          [{ hooks: { afterstart: () => undefined } }, 'hooks.afterstart'],
          [{ hooks: { afterStart: 'log' } }, 'hooks.afterStart'],
          [{ hooks: [] }, 'hooks'],
        ];
        for (const [bad, path] of atConstruction) {
          const e = await rejects(Promise.resolve().then(() => createToolStepSaga({ execution: on.execution, adapter: port, ...bad } as unknown as ToolStepSagaOptions)));
          expect(e, JSON.stringify(bad)).to.be.instanceOf(ValidationError);
          expect((e as ValidationError).issues[0]?.path, JSON.stringify(bad)).to.equal(path);
        }
        for (const [bad, path] of [[{ execution: 'enabled', claim: {} }, 'claim'], [{ execution: 'enabled', claims: {} }, 'claims']] as const) {
          const e = await rejects(Promise.resolve().then(() => openExecution(on.a, bad as never)));
          expect(e, path).to.be.instanceOf(ValidationError);
          expect((e as ValidationError).issues[0]?.path).to.equal(path);
        }
        for (const clock of [() => new Date(), () => 1.5, () => -1, () => '1790000000000']) {
          const e = await rejects(createSaga({ adapter: port, clock: clock as unknown as () => number }).drive(triggerOf(s), plan));
          expect(e, String(clock)).to.be.instanceOf(ValidationError);
          expect((e as ValidationError).message).to.contain('clock');
        }
        expect(port.calls).to.have.length(0);
        expect(await on.a.runs.readStream(s.runId)).to.have.length(3);
        expect(await on.a.recovery.inDoubt()).to.deep.equal([]);
      });
    });
  });
};
