import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { expect } from 'chai';
import {
  PreconditionError,
  SemanticConflictError,
  ValidationError,
  attemptIdsOf,
  type AdapterResult,
  type AdapterStart,
  type StartPlan,
  type ToolAdapterPort,
  type ToolExecutionStartCommand,
  type ToolStepTrigger,
} from '../../domain';
import { buildScenario, type Scenario } from '../../domain/scenario';
import type { RecoverableStartBarrierAuthority, StoredBarrier } from '../../application/authority';
import { createToolStepSaga } from '../../application/saga';
import { rejects } from '../../testkit/rejects';

// The orchestration saga (issue 5) against real authorities. The adapter port is the only test
// double: it records each invocation and, when called, proves the start already committed by
// reading the barrier through a separate read (another connection where the backend has one).

export interface SagaBackend {
  readonly name: string;
  open(): Promise<{
    authority: RecoverableStartBarrierAuthority;
    /** `getByStartId` through another connection to the same store (or the same store where there is only one). */
    separateRead(startId: string): Promise<StoredBarrier | null>;
    /** Where a child process finds the same store: `--db PATH` or `--postgres URL`. */
    target?: { readonly kind: 'sqlite' | 'postgres'; readonly location: string };
    close(): Promise<void>;
  }>;
}

export const planOf = (c: ToolExecutionStartCommand): StartPlan => ({
  project: c.project,
  toolDefinition: c.toolDefinition,
  handlerBinding: c.handlerBinding,
  admission: c.admission,
  contracts: c.contracts,
});


/** The one test double: records calls, checks the barrier is durable before "acting". */
export class RecordingAdapter implements ToolAdapterPort {
  readonly calls: AdapterStart[] = [];
  readonly sawCommitted: boolean[] = [];
  constructor(
    private readonly separateRead: (startId: string) => Promise<StoredBarrier | null>,
    private readonly behave: (start: AdapterStart, n: number) => Promise<AdapterResult> = async () => ({ outcome: 'completed', reason: 'tool_succeeded' }),
  ) {}
  async invoke(start: AdapterStart): Promise<AdapterResult> {
    const durable = await this.separateRead(start.barrier.startId);
    this.sawCommitted.push(durable !== null && durable.barrierDigest === start.barrierDigest);
    this.calls.push(start);
    return this.behave(start, this.calls.length);
  }
}

export const sagaConformance = (backend: SagaBackend): void => {
  describe(`orchestration saga: ${backend.name}`, function () {
    this.timeout(60_000);
    let env: Awaited<ReturnType<SagaBackend['open']>>;
    let a: RecoverableStartBarrierAuthority;
    beforeEach(async () => {
      env = await backend.open();
      a = env.authority;
    });
    afterEach(() => env.close());

    const ready = async (options: Parameters<typeof buildScenario>[0] = {}) => {
      const s = buildScenario(options);
      for (const c of s.lifecycle) await a.runs.handle(c);
      return s;
    };
    const triggerOf = (s: Scenario, over: Partial<ToolStepTrigger> = {}): ToolStepTrigger =>
      (s.approval
        ? { kind: 'approval_granted', runId: s.runId, stepRunId: s.stepRunId, stepRunVersion: 2, requestedAtMs: 1_790_000_000_000, approval: s.approval, ...over }
        : { kind: 'ready', runId: s.runId, stepRunId: s.stepRunId, stepRunVersion: 2, requestedAtMs: 1_790_000_000_000, ...over }) as ToolStepTrigger;
    const adapter = (behave?: ConstructorParameters<typeof RecordingAdapter>[1]) => new RecordingAdapter(env.separateRead, behave);

    it('R3.8: ready -> prepare -> the adapter, once, only after the start committed -> the outcome recorded as a fact', async () => {
      const s = await ready();
      const port = adapter();
      const result = await createToolStepSaga({ authority: a, adapter: port, sagaId: 'saga-7' }).drive(triggerOf(s), planOf(s.startCommand()));
      expect(result).to.include({ status: 'completed', prepared: 'created', invoked: true });
      expect(port.calls).to.have.length(1);
      expect(port.sawCommitted).to.deep.equal([true]);
      expect(port.calls[0]!.barrier).to.deep.equal(result.barrier.record);
      expect(result.barrier.record.startId).to.equal(attemptIdsOf(s.runId, s.stepRunId, 3).startId);
      if (result.status !== 'completed') throw new Error('unreachable');
      expect(result.outcome).to.include({ outcome: 'completed', decidedBy: 'saga-7', reason: 'tool_succeeded', stepRunVersion: 4 });
      expect(await a.recovery.inDoubt()).to.deep.equal([]);
      expect((await a.runs.getStepRun(s.runId, s.stepRunId))?.status).to.equal('completed');
      const types = (await a.runs.readStream(s.runId)).map((e) => e.event.type);
      expect(types.slice(-2)).to.deep.equal(['ToolExecutionStartBarrierCommitted', 'StepRunCompleted']);
    });

    it('R1.4.4: an approval_granted trigger starts from waiting_approval with the exact approval; a failing tool is recorded as failed', async () => {
      const s = await ready({ withApproval: true });
      const port = adapter(async () => ({ outcome: 'failed', reason: 'tool_failed', outcomeDigest: s.startCommand().admission.actionDigest }));
      const result = await createToolStepSaga({ authority: a, adapter: port }).drive(triggerOf(s), planOf(s.startCommand()));
      expect(result).to.include({ status: 'failed', prepared: 'created' });
      expect(result.barrier.record.approval).to.deep.equal(s.approval);
      expect(result.barrier.record.attempt.fromStatus).to.equal('waiting_approval');
      expect(port.sawCommitted).to.deep.equal([true]);
      expect(await a.recovery.outcome(result.barrier.record.startId)).to.include({ outcome: 'failed', outcomeDigest: s.startCommand().admission.actionDigest });
    });

    describe('never when prepare fails', () => {
      const expectUntouched = async (s: Scenario, port: RecordingAdapter, streamLength: number) => {
        expect(port.calls).to.have.length(0);
        expect(await a.runs.readStream(s.runId)).to.have.length(streamLength);
        expect(await a.recovery.inDoubt()).to.deep.equal([]);
      };

      it('R1.5: a validation failure (forbidden content in the plan) never reaches the adapter', async () => {
        const s = await ready();
        const port = adapter();
        const base = planOf(s.startCommand());
        const plan = { ...base, admission: { ...base.admission, profile: 'https://example.org/x' } };
        expect(await rejects(createToolStepSaga({ authority: a, adapter: port }).drive(triggerOf(s), plan))).to.be.instanceOf(ValidationError);
        expect(await rejects(createToolStepSaga({ authority: a, adapter: port }).drive({ ...triggerOf(s), input: 'x' }, planOf(s.startCommand())))).to.be.instanceOf(ValidationError);
        await expectUntouched(s, port, 3);
      });

      it('R2.2: a precondition failure (stale version, wrong status, missing StepRun, other project) never reaches the adapter', async () => {
        const s = await ready();
        const port = adapter();
        const saga = createToolStepSaga({ authority: a, adapter: port });
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
        const saga = createToolStepSaga({ authority: a, adapter: port });
        // A replica already committed this attempt with its own trigger time: same ids, other content.
        const winner = await saga.drive(triggerOf(s, { requestedAtMs: 1 }), planOf(s.startCommand()));
        expect(port.calls).to.have.length(1);
        const drift = await rejects(saga.drive(triggerOf(s, { requestedAtMs: 2 }), planOf(s.startCommand())));
        expect(drift).to.be.instanceOf(SemanticConflictError);
        expect((drift as SemanticConflictError).identity).to.equal('startId');
        expect(port.calls).to.have.length(1);
        expect(winner.status).to.equal('completed');

        const other = await ready();
        await a.barriers.prepare(other.startCommand()); // a start that did not come from the saga holds attempt v3
        const held = await rejects(saga.drive(triggerOf(other), planOf(other.startCommand())));
        expect(held).to.be.instanceOf(SemanticConflictError);
        expect(port.calls).to.have.length(1);
      });
    });

    describe('never twice for one attempt', () => {
      it('R4.2: a replayed trigger after the outcome was recorded is an exact replay: existing, no second invocation', async () => {
        const s = await ready();
        const port = adapter();
        const saga = createToolStepSaga({ authority: a, adapter: port });
        const first = await saga.drive(triggerOf(s), planOf(s.startCommand()));
        const length = (await a.runs.readStream(s.runId)).length;
        for (let i = 0; i < 3; i++) {
          const replay = await saga.drive(JSON.parse(JSON.stringify(triggerOf(s))), planOf(s.startCommand()));
          expect(replay).to.include({ status: 'already_resolved', prepared: 'existing', invoked: false });
          expect(replay.barrier).to.deep.equal(first.barrier);
        }
        expect(port.calls).to.have.length(1);
        expect(await a.runs.readStream(s.runId)).to.have.length(length);
      });

      it('issue 5: an attempt an operator resolved (lost) is never invoked by a replay; the retry at the new version is invoked once', async () => {
        const s = await ready();
        const crashed = adapter(async () => {
          throw new Error('worker connection reset before the tool started');
        });
        const saga = (port: RecordingAdapter) => createToolStepSaga({ authority: a, adapter: port });
        const first = await saga(crashed).drive(triggerOf(s), planOf(s.startCommand()));
        expect(first).to.include({ status: 'in_doubt', invoked: true });
        await a.recovery.resolve(first.barrier.record.startId, 'lost', { decidedBy: 'ops', reason: 'no_trace_of_tool' });
        const port = adapter();
        expect(await saga(port).drive(triggerOf(s), planOf(s.startCommand()))).to.include({ status: 'already_resolved', invoked: false });
        expect(port.calls).to.have.length(0);
        const { runVersion: _v, events } = await a.runs.handle({ type: 'MarkStepRunReady', data: { runId: s.runId, stepRunId: s.stepRunId, requestedAtMs: 5 } });
        const readyAgain = events[0]!.event;
        if (readyAgain.type !== 'StepRunReady') throw new Error('unreachable');
        const retry = await saga(port).drive(triggerOf(s, { stepRunVersion: readyAgain.data.stepRunVersion }), planOf(s.startCommand()));
        expect(retry).to.include({ status: 'completed', prepared: 'created' });
        expect(retry.barrier.record.attempt.startedStepRunVersion).to.equal(6);
        expect(port.calls).to.have.length(1);
        expect((await a.recovery.history(s.runId, s.stepRunId)).map((h) => [h.attempt, h.outcome?.outcome])).to.deep.equal([
          [3, 'lost'],
          [6, 'completed'],
        ]);
      });

      it('issue 5: an unknown adapter outcome (it threw) leaves the start in doubt; a replay resumes it (existing, no outcome) and records once', async () => {
        const s = await ready();
        const flaky = adapter(async (_start, n) => {
          if (n === 1) throw new Error('adapter lost its connection');
          return { outcome: 'completed', reason: 'tool_succeeded' };
        });
        const saga = createToolStepSaga({ authority: a, adapter: flaky });
        const first = await saga.drive(triggerOf(s), planOf(s.startCommand()));
        expect(first).to.include({ status: 'in_doubt', prepared: 'created' });
        expect((await a.recovery.inDoubt()).map((e) => e.startId)).to.deep.equal([first.barrier.record.startId]);
        const resumed = await saga.drive(triggerOf(s), planOf(s.startCommand()));
        expect(resumed).to.include({ status: 'completed', prepared: 'existing' });
        expect(await saga.drive(triggerOf(s), planOf(s.startCommand()))).to.include({ status: 'already_resolved', invoked: false });
        expect(flaky.calls.map((c) => c.barrier.startId)).to.deep.equal([first.barrier.record.startId, first.barrier.record.startId]);
        expect(flaky.sawCommitted).to.deep.equal([true, true]);
      });

      it('issue 5: an invalid adapter report records nothing and leaves the start in doubt', async () => {
        const s = await ready();
        const port = adapter(async () => ({ outcome: 'completed', reason: 'see /var/log/tool.log' as never }));
        const result = await createToolStepSaga({ authority: a, adapter: port }).drive(triggerOf(s), planOf(s.startCommand()));
        expect(result).to.include({ status: 'in_doubt' });
        if (result.status !== 'in_doubt') throw new Error('unreachable');
        expect(result.error.code).to.equal('VALIDATION_FAILED');
        expect(await a.recovery.inDoubt()).to.have.length(1);
      });

      it('issue 5: an operator decision made while the adapter ran stands; the saga does not overwrite it', async () => {
        const s = await ready();
        const port = adapter(async (start) => {
          await a.recovery.resolve(start.barrier.startId, 'lost', { decidedBy: 'oncall', reason: 'worker_lost' });
          return { outcome: 'completed', reason: 'tool_succeeded' };
        });
        const result = await createToolStepSaga({ authority: a, adapter: port }).drive(triggerOf(s), planOf(s.startCommand()));
        expect(result).to.include({ status: 'already_resolved', invoked: true });
        if (result.status !== 'already_resolved') throw new Error('unreachable');
        expect(result.outcome).to.include({ outcome: 'lost', decidedBy: 'oncall' });
      });
    });

    it('issue 5: a crash between commit and invocation (saga process killed, port never reached) leaves an in-doubt start that recovery lists; a replay resumes it', async () => {
      const s = await ready();
      const plan = planOf(s.startCommand());
      if (env.target === undefined) {
        // No second process can share an in-memory store: the saga is abandoned instead, stuck
        // at the port forever (its process "killed" there), and a new saga instance takes over.
        let reached!: () => void;
        const atPort = new Promise<void>((resolve) => (reached = resolve));
        void createToolStepSaga({ authority: a, adapter: { invoke: () => (reached(), new Promise<never>(() => undefined)) } }).drive(triggerOf(s), plan);
        await atPort;
      } else {
          const child = spawnSync(process.execPath, ['--require', 'tsx/cjs', join(__dirname, 'crashChild.ts'), env.target.kind, env.target.location, JSON.stringify(triggerOf(s)), JSON.stringify(plan)], {
          cwd: join(__dirname, '..', '..'),
          encoding: 'utf8',
          timeout: 60_000,
        });
        expect(child.signal, child.stderr).to.equal('SIGKILL');
        expect(child.stdout).to.contain('committed');
      }
      const [doubt, ...more] = await a.recovery.inDoubt({ runId: s.runId });
      expect(more).to.have.length(0);
      expect(doubt).to.include({ runId: s.runId, stepRunId: s.stepRunId, attempt: 3, startId: attemptIdsOf(s.runId, s.stepRunId, 3).startId });
      expect((await a.runs.getStepRun(s.runId, s.stepRunId))?.status).to.equal('running');
      const port = adapter();
      const resumed = await createToolStepSaga({ authority: a, adapter: port }).drive(triggerOf(s), plan);
      expect(resumed).to.include({ status: 'completed', prepared: 'existing' });
      expect(port.calls).to.have.length(1);
      expect(await a.recovery.inDoubt()).to.deep.equal([]);
    });
  });
};
