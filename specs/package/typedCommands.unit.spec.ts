import { command } from '@event-driven-io/emmett';
import { expect } from 'chai';
import { ValidationError, nextStartCommand, planOfBarrier, type LifecycleCommand, type ToolExecutionStartCommand } from '../../domain';
import { buildScenario, openMemoryStartBarrier } from '../../infrastructure/memory/testing';
import { rejects } from '../../testkit/rejects';

// R1.5 and R6.1: the public command surface is typed (a misspelled type or field does not
// compile: `npm run typecheck` fails if any `@ts-expect-error` below stops being an error),
// still decoded strictly at run time, and accepts emmett's own `command()` envelope.

describe('R6.1 typed lifecycle and start commands (compile time and run time)', () => {
  it('R1.5 a misspelled command type or field is a compile error and, forced through, a typed validation error writing nothing', async () => {
    const authority = await openMemoryStartBarrier();
    const s = buildScenario();
    // @ts-expect-error 'CreateRUn' is not a lifecycle command type
    const misspelled = authority.runs.handle({ type: 'CreateRUn', data: { runId: s.runId } });
    expect(await rejects(misspelled)).to.be.instanceOf(ValidationError);
    const createRun = s.lifecycle[0] as Extract<LifecycleCommand, { type: 'CreateRun' }>;
    // @ts-expect-error `projectID` is not a field of CreateRun
    const wrongField = authority.runs.handle({ type: 'CreateRun', data: { ...createRun.data, projectID: 'p' } });
    expect(await rejects(wrongField)).to.be.instanceOf(ValidationError);
    // @ts-expect-error a start command needs every field (R1.1)
    const partial = authority.barriers.prepare({ schema: 'qinglong/tool-execution-start-command@v1', startId: 'start-1' });
    expect(await rejects(partial)).to.be.instanceOf(ValidationError);
    expect(await authority.runs.readStream(s.runId)).to.deep.equal([]);
  });

  it("R6.1 emmett's command() output is accepted: kind and metadata are ignored, nothing else is relaxed", async () => {
    const authority = await openMemoryStartBarrier();
    const s = buildScenario();
    const [createRun, createStepRun, ready] = s.lifecycle as [LifecycleCommand, LifecycleCommand, LifecycleCommand];
    const viaEmmett = command<Extract<LifecycleCommand, { type: 'CreateRun' }>>('CreateRun', createRun.data as Extract<LifecycleCommand, { type: 'CreateRun' }>['data'], { now: new Date() });
    expect(viaEmmett.kind).to.equal('Command');
    await authority.runs.handle(viaEmmett);
    await authority.runs.handle(createStepRun);
    await authority.runs.handle(ready);
    expect((await authority.runs.readStream(s.runId)).map((e) => e.event.type)).to.deep.equal(['RunCreated', 'StepRunCreated', 'StepRunReady']);

    const other = buildScenario().lifecycle[0]!;
    for (const bad of [
      { ...other, kind: 'Event' },
      { ...other, metadata: 'now' },
      { ...other, extra: true },
    ]) {
      expect(await rejects(authority.runs.handle(bad as never)), JSON.stringify(Object.keys(bad))).to.be.instanceOf(ValidationError);
    }
  });

  it('R4.4 nextStartCommand builds the next attempt from the stored StepRun; planOfBarrier recovers the plan after lost -> ready', async () => {
    const authority = await openMemoryStartBarrier();
    const s = buildScenario();
    for (const c of s.lifecycle) await authority.runs.handle(c);
    const first = await authority.barriers.prepare(s.startCommand());
    await authority.recovery.resolve(first.barrier.record.startId, 'lost', { decidedBy: 'oncall', reason: 'worker_lost', requestedAtMs: s.startCommand().requestedAtMs + 1 });
    await authority.runs.handle({ type: 'MarkStepRunReady', data: { runId: s.runId, stepRunId: s.stepRunId, requestedAtMs: s.startCommand().requestedAtMs + 2 } });
    const stepRun = (await authority.runs.getStepRun(s.runId, s.stepRunId))!;
    const next: ToolExecutionStartCommand = nextStartCommand(planOfBarrier(first.barrier.record), stepRun, s.startCommand().requestedAtMs + 3);
    expect(nextStartCommand(planOfBarrier(first.barrier.record), stepRun, s.startCommand().requestedAtMs + 3)).to.deep.equal(next);
    const second = await authority.barriers.prepare(next);
    expect(second.outcome).to.equal('created');
    expect(second.barrier.record.attempt.startedStepRunVersion).to.equal(stepRun.version + 1);
    expect(second.barrier.record.startId).not.to.equal(first.barrier.record.startId);
    expect(() => nextStartCommand(planOfBarrier(first.barrier.record), { ...stepRun, status: 'running' }, 1)).to.throw(/ready/);
  });
});
