import { expect } from 'chai';
import {
  CorruptRecordError,
  PreconditionError,
  SemanticConflictError,
  ValidationError,
  type ToolExecutionStartCommand,
} from '../../domain';
import { buildScenario, type Scenario } from '../../domain/scenario';
import { START_STEPS, type StartBarrierAuthority, type StartStep, type StartStepHook } from '../../application/authority';
import { rejects } from '../../testkit/rejects';

// One suite, run unchanged against every backend (in-memory, SQLite, PostgreSQL). A backend
// registers itself with a factory; the optional `counts` lets the suite prove that a failed
// start changed no table at all, not just the stream.

export interface ConformanceBackend {
  readonly name: string;
  /** A fresh, empty authority; `hook` is the fault-injection point inside the start transaction. */
  open(hook?: StartStepHook): Promise<StartBarrierAuthority>;
  /** Row count of every table the backend owns. */
  counts?(authority: StartBarrierAuthority): Promise<Record<string, number>>;
}

export const setUp = async (authority: StartBarrierAuthority, options: Parameters<typeof buildScenario>[0] = {}): Promise<Scenario> => {
  const scenario = buildScenario(options);
  for (const command of scenario.lifecycle) await authority.runs.handle(command);
  return scenario;
};


export const conformanceSuite = (backend: ConformanceBackend): void => {
  describe(`conformance: ${backend.name}`, function () {
    this.timeout(60_000);
    let authority: StartBarrierAuthority;
    let failAt: StartStep | undefined;
    const hook: StartStepHook = (step) => {
      if (step === failAt) throw new Error(`injected fault after ${step}`);
    };

    beforeEach(async () => {
      failAt = undefined;
      authority = await backend.open(hook);
    });
    afterEach(async () => {
      await authority.close();
    });

    /** Snapshot of everything a start could touch, to prove a failure wrote nothing. */
    const snapshot = async (s: Scenario, startId: string) => ({
      stream: (await authority.runs.readStream(s.runId)).length,
      stepRun: await authority.runs.getStepRun(s.runId, s.stepRunId),
      barrier: await authority.barriers.getByStartId(startId),
      counts: backend.counts ? await backend.counts(authority) : {},
    });

    describe('R3 one transaction, fixed order', () => {
      it('R3.3-R3.7 a start from ready commits the five facts in order and moves the StepRun to running', async () => {
        const s = await setUp(authority);
        const command = s.startCommand();
        const result = await authority.barriers.prepare(command);
        expect(result.outcome).to.equal('created');
        const events = await authority.runs.readStream(s.runId);
        expect(events.map((e) => e.event.type)).to.deep.equal([
          'RunCreated',
          'StepRunCreated',
          'StepRunReady',
          'SecurityAuditEventRecorded',
          'TraceAnchorRecorded',
          'AuditReceiptIssued',
          'StepRunStarted',
          'ToolExecutionStartBarrierCommitted',
        ]);
        expect(events.map((e) => e.streamPosition)).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8]);
        const stepRun = await authority.runs.getStepRun(s.runId, s.stepRunId);
        expect(stepRun?.status).to.equal('running');
        expect(stepRun?.version).to.equal(3);
        expect(stepRun?.digest).to.equal(result.barrier.record.attempt.startedStepRunDigest);
        expect(result.barrier.record.runEvent.runEventSequence).to.equal(7);
      });

      it('R3.10 committed_at_ms is the store clock, shared by every fact, never the caller time', async () => {
        const s = await setUp(authority, { requestedAtMs: 1_000 });
        const before = Date.now();
        const result = await authority.barriers.prepare(s.startCommand());
        const after = Date.now();
        expect(result.barrier.committedAtMs).to.not.equal(1_000);
        expect(result.barrier.committedAtMs).to.be.within(before - 5_000, after + 5_000);
        expect(result.barrier.record.requestedAtMs).to.equal(1_000);
        const facts = (await authority.runs.readStream(s.runId)).slice(3);
        expect(new Set(facts.map((e) => e.committedAtMs))).to.deep.equal(new Set([result.barrier.committedAtMs]));
      });

      for (const step of START_STEPS) {
        it(`R3.9 a failure after ${step} rolls back every fact`, async () => {
          const s = await setUp(authority);
          const command = s.startCommand();
          const was = await snapshot(s, command.startId);
          failAt = step;
          const error = await rejects(authority.barriers.prepare(command));
          expect(error.message).to.contain(`injected fault after ${step}`);
          expect(await snapshot(s, command.startId)).to.deep.equal(was);
          expect(was.stepRun?.status).to.equal('ready');
          failAt = undefined;
          expect((await authority.barriers.prepare(command)).outcome).to.equal('created');
        });
      }

      it('R3.5 starts of different StepRuns of one Run chain on the Run version', async () => {
        const s = await setUp(authority);
        await authority.runs.handle({ type: 'CreateStepRun', data: { runId: s.runId, stepRunId: 'second-step', kind: 'tool', toolDefinition: s.stepRun.toolDefinition!, requestedAtMs: 1 } });
        await authority.runs.handle({ type: 'MarkStepRunReady', data: { runId: s.runId, stepRunId: 'second-step', requestedAtMs: 1 } });
        const first = await authority.barriers.prepare(s.startCommand());
        const second = (await authority.runs.getStepRun(s.runId, 'second-step'))!;
        const command2 = { ...s.startCommand(second, 'second'), stepRun: { ...s.startCommand(second, 'second').stepRun, stepRunId: 'second-step' } };
        const result = await authority.barriers.prepare(command2);
        expect(result.outcome).to.equal('created');
        expect(result.barrier.record.runEvent.runEventSequence).to.equal(first.barrier.record.runEvent.runEventSequence + 5);
      });
    });

    describe('R4 replay identity', () => {
      it('R4.2 an identical replay returns existing with the stored barrier and writes nothing', async () => {
        const s = await setUp(authority);
        const command = s.startCommand();
        const created = await authority.barriers.prepare(command);
        const was = await snapshot(s, command.startId);
        const replay = await authority.barriers.prepare(JSON.parse(JSON.stringify(command)));
        expect(replay.outcome).to.equal('existing');
        expect(replay.barrier).to.deep.equal(created.barrier);
        expect(await snapshot(s, command.startId)).to.deep.equal(was);
      });

      it('R4.2 eight concurrent identical prepares: one created, seven existing', async () => {
        const s = await setUp(authority);
        const command = s.startCommand();
        const results = await Promise.all(Array.from({ length: 8 }, () => authority.barriers.prepare(command)));
        expect(results.filter((r) => r.outcome === 'created')).to.have.length(1);
        expect(results.filter((r) => r.outcome === 'existing')).to.have.length(7);
      });

      it('R4.3 drift in content under the same startId is a semantic conflict naming startId', async () => {
        const s = await setUp(authority);
        const command = s.startCommand();
        await authority.barriers.prepare(command);
        const was = await snapshot(s, command.startId);
        const error = await rejects(authority.barriers.prepare({ ...command, admission: { ...command.admission, timeoutMs: 31_000 } }));
        expect(error).to.be.instanceOf(SemanticConflictError);
        expect((error as SemanticConflictError).identity).to.equal('startId');
        expect(await snapshot(s, command.startId)).to.deep.equal(was);
      });

      const reuse: [string, (c: ToolExecutionStartCommand, fresh: ToolExecutionStartCommand) => ToolExecutionStartCommand][] = [
        ['mutationId', (c, f) => ({ ...f, mutation: { ...f.mutation, mutationId: c.mutation.mutationId } })],
        ['runEventId', (c, f) => ({ ...f, mutation: { ...f.mutation, runEventId: c.mutation.runEventId } })],
        ['traceId', (c, f) => ({ ...f, evidence: { ...f.evidence, traceId: c.evidence.traceId } })],
        ['auditEventId', (c, f) => ({ ...f, evidence: { ...f.evidence, auditEventId: c.evidence.auditEventId } })],
        ['auditReceiptId', (c, f) => ({ ...f, evidence: { ...f.evidence, auditReceiptId: c.evidence.auditReceiptId } })],
        ['attempt', (_c, f) => f],
      ];
      for (const [identity, mutate] of reuse) {
        it(`R4.1 ${identity} binds to at most one barrier: reuse by another start is a conflict naming it`, async () => {
          const s = await setUp(authority);
          const command = s.startCommand();
          await authority.barriers.prepare(command);
          const fresh = s.startCommand(s.stepRun, 'other');
          const error = await rejects(authority.barriers.prepare(mutate(command, fresh)));
          expect(error).to.be.instanceOf(SemanticConflictError);
          expect((error as SemanticConflictError).identity).to.equal(identity);
          expect(await authority.barriers.getByStartId(fresh.startId)).to.equal(null);
        });
      }

      it('R4.4 lost -> ready -> running at the new version gets a new barrier; the first stays untouched', async () => {
        const s = await setUp(authority);
        const first = await authority.barriers.prepare(s.startCommand());
        await authority.runs.handle({ type: 'MarkStepRunLost', data: { runId: s.runId, stepRunId: s.stepRunId, decidedBy: 'operator', reason: 'no_trace_of_tool', requestedAtMs: 2 } });
        await authority.runs.handle({ type: 'MarkStepRunReady', data: { runId: s.runId, stepRunId: s.stepRunId, requestedAtMs: 3 } });
        const ready = (await authority.runs.getStepRun(s.runId, s.stepRunId))!;
        expect(ready.version).to.equal(5);
        const second = await authority.barriers.prepare(s.startCommand(ready));
        expect(second.outcome).to.equal('created');
        expect(second.barrier.record.attempt.startedStepRunVersion).to.equal(6);
        expect(await authority.barriers.getByStepRunAttempt(s.runId, s.stepRunId, 3)).to.deep.equal(first.barrier);
        expect(await authority.barriers.getByStepRunAttempt(s.runId, s.stepRunId, 6)).to.deep.equal(second.barrier);
        expect(await authority.barriers.getByStartId(first.barrier.record.startId)).to.deep.equal(first.barrier);
      });

      it('R5.4 lookups of unknown identities return null', async () => {
        expect(await authority.barriers.getByStartId('no-such-start')).to.equal(null);
        expect(await authority.barriers.getByStepRunAttempt('no-run', 'no-step', 3)).to.equal(null);
      });
    });

    describe('R2 preconditions', () => {
      it('R2.1 the barrier never creates a StepRun: a start on a missing Run or StepRun is refused', async () => {
        const s = buildScenario();
        const error = await rejects(authority.barriers.prepare(s.startCommand()));
        expect(error).to.be.instanceOf(PreconditionError);
        expect((error as PreconditionError).reason).to.equal('run_not_found');
        await authority.runs.handle(s.lifecycle[0]!);
        const missing = await rejects(authority.barriers.prepare(s.startCommand()));
        expect((missing as PreconditionError).reason).to.equal('step_run_not_found');
        expect(await authority.runs.readStream(s.runId)).to.have.length(1);
      });

      it('R2.2 a stale StepRun version is refused and nothing is written', async () => {
        const s = await setUp(authority);
        const command = s.startCommand();
        const was = await snapshot(s, command.startId);
        const stale = { ...command, stepRun: { ...command.stepRun, expectedVersion: 1 } };
        const error = await rejects(authority.barriers.prepare(stale));
        expect(error).to.be.instanceOf(PreconditionError);
        expect(await snapshot(s, command.startId)).to.deep.equal(was);
      });

      it('R2.1 a start from waiting_approval with the exact approval commits', async () => {
        const s = await setUp(authority, { withApproval: true });
        const result = await authority.barriers.prepare(s.startCommand());
        expect(result.outcome).to.equal('created');
        expect(result.barrier.record.approval).to.deep.equal(s.approval);
        expect(result.barrier.record.attempt.fromStatus).to.equal('waiting_approval');
      });

      it('R2.2 a wrong approval is refused', async () => {
        const s = await setUp(authority, { withApproval: true });
        const command = s.startCommand();
        const error = await rejects(authority.barriers.prepare({ ...command, approval: { ...command.approval!, dispatchId: 'other-dispatch' } }));
        expect((error as PreconditionError).reason).to.equal('approval_mismatch');
      });
    });

    describe('R1 validation at the boundary', () => {
      it('R1.5 an unknown or forbidden field is a typed validation error and writes nothing', async () => {
        const s = await setUp(authority);
        const command = s.startCommand();
        const was = await snapshot(s, command.startId);
        const error = await rejects(authority.barriers.prepare({ ...command, input: { cmd: 'rm -rf' } } as never));
        expect(error).to.be.instanceOf(ValidationError);
        expect((error as ValidationError).issues[0]).to.include({ path: 'input', reason: 'forbidden_field' });
        expect(await snapshot(s, command.startId)).to.deep.equal(was);
      });

      it('R1.1 an oversized command is refused and writes nothing', async () => {
        const s = await setUp(authority);
        const command = s.startCommand();
        const annotations = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`note${i}`, 'x'.repeat(8000)]));
        const error = await rejects(authority.barriers.prepare({ ...command, annotations } as never));
        expect((error as ValidationError).reason).to.equal('too_large');
        expect((await authority.runs.readStream(s.runId)).length).to.equal(3);
      });
    });

    describe('R5.3 reads re-verify', () => {
      it('R5.3 a barrier read back verifies against its facts and equals what prepare returned', async () => {
        const s = await setUp(authority);
        const created = await authority.barriers.prepare(s.startCommand());
        const read = await authority.barriers.getByStartId(created.barrier.record.startId);
        expect(read).to.deep.equal(created.barrier);
        expect(read).to.not.be.instanceOf(CorruptRecordError);
      });
    });
  });
};
