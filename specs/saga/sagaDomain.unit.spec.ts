import { expect } from 'chai';
import {
  ValidationError,
  attemptIdsOf,
  buildSagaStartCommand,
  decodeAdapterResult,
  decodeStartCommand,
  decodeToolStepTrigger,
  shouldInvoke,
  stepRunDigest,
} from '../../domain';
import { buildScenario } from '../../domain/scenario';
import { planOf } from './sagaConformance';

// The saga's pure part: its message, the command it builds, the one rule of invocation.

describe('orchestration saga, pure part (domain/saga.ts)', () => {
  const s = buildScenario({ prefix: 'saga-unit' });
  const trigger = { kind: 'ready', runId: s.runId, stepRunId: s.stepRunId, stepRunVersion: 2, requestedAtMs: 5 } as const;

  it('R4.1/R4.4: attempt ids are deterministic per attempt, distinct across attempts, and valid identities', () => {
    const a = attemptIdsOf('run-1', 'step-1', 3);
    expect(attemptIdsOf('run-1', 'step-1', 3)).to.deep.equal(a);
    const b = attemptIdsOf('run-1', 'step-1', 6);
    for (const k of Object.keys(a) as (keyof typeof a)[]) expect(a[k]).to.not.equal(b[k]);
    expect(new Set(Object.values(a)).size).to.equal(7);
  });

  it('R1.4: the built command decodes, binds the StepRun as it stood at the trigger, and is identical on replay', () => {
    const c = buildSagaStartCommand(planOf(s.startCommand()), trigger, { ...s.stepRun, status: 'running', version: 3, lastStartId: 'x' });
    const decoded = decodeStartCommand(c);
    expect(c.stepRun).to.deep.equal({ runId: s.runId, stepRunId: s.stepRunId, kind: 'tool', expectedVersion: 2, expectedDigest: stepRunDigest(s.stepRun) });
    expect(c.startId).to.equal(attemptIdsOf(s.runId, s.stepRunId, 3).startId);
    expect(decodeStartCommand(buildSagaStartCommand(planOf(s.startCommand()), trigger, s.stepRun)).commandDigest).to.equal(decoded.commandDigest);
    expect(decodeStartCommand(buildSagaStartCommand(planOf(s.startCommand()), { ...trigger, requestedAtMs: 6 }, s.stepRun)).commandDigest).to.not.equal(decoded.commandDigest);
  });

  it('R1.4.4: an approval_granted trigger binds the approval and starts from waiting_approval', () => {
    const w = buildScenario({ prefix: 'saga-unit-approval', withApproval: true });
    const c = buildSagaStartCommand(planOf(w.startCommand()), { ...trigger, runId: w.runId, stepRunId: w.stepRunId, kind: 'approval_granted', approval: w.approval! }, w.stepRun);
    expect(c.mutation.fromStatus).to.equal('waiting_approval');
    expect(c.approval).to.deep.equal(w.approval);
    expect(c.stepRun.expectedDigest).to.equal(stepRunDigest(w.stepRun));
  });

  it('R1.5: triggers and adapter reports are decoded strictly', () => {
    expect(() => decodeToolStepTrigger({ ...trigger, extra: 1 })).to.throw(ValidationError);
    expect(() => decodeToolStepTrigger({ ...trigger, kind: 'approval_granted' })).to.throw(ValidationError);
    expect(() => decodeAdapterResult({ outcome: 'lost', reason: 'other_see_note' })).to.throw(ValidationError);
    expect(() => decodeAdapterResult({ outcome: 'completed', reason: 'other_see_note', output: 'secret' })).to.throw(ValidationError);
    expect(decodeAdapterResult({ outcome: 'failed', reason: 'tool_failed' })).to.deep.equal({ outcome: 'failed', reason: 'tool_failed' });
  });

  it('issue 5: the adapter is invoked only while the attempt has no outcome fact', () => {
    expect(shouldInvoke('created', null)).to.equal(true);
    expect(shouldInvoke('existing', null)).to.equal(true);
    for (const o of ['completed', 'failed', 'lost'] as const) {
      expect(shouldInvoke('existing', o)).to.equal(false);
      expect(shouldInvoke('created', o)).to.equal(false);
    }
  });
});
