import { expect } from 'chai';
import {
  ValidationError,
  attemptIdsOf,
  buildSagaStartCommand,
  ExecutionRefusedError,
  assertMayExecute,
  decodeAdapterReport,
  decodeInspectReport,
  decodeStartCommand,
  decodeToolStepTrigger,
  firstStep,
  invocationPlanDigest,
  outputDigestOf,
  stepAfterInspect,
  stepRunDigest,
  type ToolAdapter,
} from '../../domain';
import { buildScenario } from '../../domain/scenario';
import { INVOCATION, contractAdapterFor, planOf } from './sagaConformance';

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

  it('R1.5, R11.1: triggers, adapter reports and inspect reports are decoded strictly (codes, digests and sizes only)', () => {
    expect(() => decodeToolStepTrigger({ ...trigger, extra: 1 })).to.throw(ValidationError);
    expect(() => decodeToolStepTrigger({ ...trigger, kind: 'approval_granted' })).to.throw(ValidationError);
    const out = outputDigestOf('{"ok":true}');
    expect(out.outputBytes).to.equal(11);
    expect(decodeAdapterReport({ outcome: 'failed', code: 'tool_failed', ...out })).to.deep.equal({ outcome: 'failed', code: 'tool_failed', ...out });
    expect(() => decodeAdapterReport({ outcome: 'lost', code: 'tool_failed', ...out })).to.throw(ValidationError);
    expect(() => decodeAdapterReport({ outcome: 'completed', code: 'exited 0 see log', ...out })).to.throw(ValidationError);
    expect(() => decodeAdapterReport({ outcome: 'completed', code: 'tool_succeeded', ...out, output: 'secret' })).to.throw(ValidationError);
    expect(() => decodeInspectReport({ state: 'maybe' })).to.throw(ValidationError);
    expect(decodeInspectReport({ state: 'not_started' })).to.deep.equal({ state: 'not_started' });
  });

  it('R11.2: the first driver invokes; a later one inspects, or invokes again only with idempotent starts, or stops in doubt', () => {
    const claim = (generation: number) => ({ startId: 's', driverId: 'd', generation, leaseUntilMs: 0 });
    const plain = contractAdapterFor(planOf(s.startCommand()), { idempotentStart: false });
    const idem = contractAdapterFor(planOf(s.startCommand()), { idempotentStart: true });
    const inspecting: ToolAdapter = { ...plain, inspect: async () => ({ state: 'unknown' }) };
    expect(firstStep(claim(1), plain)).to.deep.equal({ kind: 'invoke' });
    expect(firstStep(claim(2), plain)).to.deep.equal({ kind: 'in_doubt', why: 'no_inspect' });
    expect(firstStep(claim(2), idem)).to.deep.equal({ kind: 'invoke' });
    expect(firstStep(claim(3), inspecting)).to.deep.equal({ kind: 'inspect' });
    const g = { idempotentStart: false, enforcesTimeout: true };
    expect(stepAfterInspect('succeeded', g)).to.deep.equal({ kind: 'record', outcome: 'completed', code: 'inspected_succeeded' });
    expect(stepAfterInspect('failed', g)).to.deep.equal({ kind: 'record', outcome: 'failed', code: 'inspected_failed' });
    expect(stepAfterInspect('not_started', g)).to.deep.equal({ kind: 'invoke' });
    expect(stepAfterInspect('running', { ...g, idempotentStart: true })).to.deep.equal({ kind: 'in_doubt', why: 'inspect_running' });
    expect(stepAfterInspect('unknown', g)).to.deep.equal({ kind: 'in_doubt', why: 'inspect_unknown' });
    expect(stepAfterInspect('unknown', { ...g, idempotentStart: true })).to.deep.equal({ kind: 'invoke' });
  });

  it('R11.3: execution is refused unless enabled explicitly and the adapter meets the contract for this barrier', () => {
    const plan = planOf(s.startCommand());
    const ok = contractAdapterFor(plan);
    const refusal = (enabled: unknown, adapter: unknown, p = plan, invocation = INVOCATION) => {
      try {
        assertMayExecute(enabled, adapter, p, invocation);
        return 'allowed';
      } catch (e) {
        expect(e).to.be.instanceOf(ExecutionRefusedError);
        return (e as ExecutionRefusedError).reason;
      }
    };
    expect(refusal(true, ok)).to.equal('allowed');
    expect(invocationPlanDigest(INVOCATION)).to.equal(plan.admission.planDigest);
    expect(refusal(undefined, ok)).to.equal('execution_disabled');
    expect(refusal('yes', ok)).to.equal('execution_disabled');
    expect(refusal(true, { invoke: async () => ({}) })).to.equal('adapter_contract_unmet');
    expect(refusal(true, { ...ok, declaration: { ...ok.declaration, guarantees: { idempotentStart: true, enforcesTimeout: false } } })).to.equal('adapter_contract_unmet');
    expect(refusal(true, { ...ok, declaration: { ...ok.declaration, kind: 'http' } })).to.equal('adapter_mismatch');
    expect(refusal(true, { ...ok, declaration: { ...ok.declaration, ref: { ...ok.declaration.ref, id: 'other-adapter' } } })).to.equal('adapter_mismatch');
    expect(refusal(true, ok, plan, { input: { other: true } })).to.equal('plan_mismatch');
  });
});
