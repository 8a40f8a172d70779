import { expect } from 'chai';
import { openMemoryStartBarrier } from '../../infrastructure/memory/testing';
import { openExecution, recover, runTool, type ExecutionAuthority, type Tool } from '../../application/saga';
import { isStartBarrierError, outputDigestOf, type AdapterAnswer, type InspectAnswer, type ToolAdapter } from '../../domain';
import type { RecoverableStartBarrierAuthority } from '../../infrastructure/memory/testing';
import { TEST_PLANS } from '../../testkit/planKeys';

// runTool and recover on the in-memory backend: one call runs a tool through the barrier and
// returns its output; the same call again settles the same attempt; bad calls write nothing.

const REF = { id: 'adapter.echo.v1', digest: `sha256:${'a'.repeat(64)}` };

/** A tool whose side effects are counted on its own side, with a status it keeps by start id. */
const echoTool = (options: { loseFirstAnswer?: boolean; inspect?: boolean } = {}) => {
  const effects = new Map<string, number>();
  const outputs = new Map<string, string>();
  let lost = options.loseFirstAnswer === true;
  const adapter: ToolAdapter = {
    declaration: { kind: 'process', ref: REF, guarantees: { idempotentStart: false, enforcesTimeout: true } },
    async start(ticket, plan): Promise<AdapterAnswer> {
      effects.set(ticket.startId, (effects.get(ticket.startId) ?? 0) + 1);
      const text = JSON.stringify({ echoed: plan.input });
      outputs.set(ticket.startId, text);
      if (lost) {
        lost = false;
        throw new Error('the response was lost');
      }
      return { outcome: 'completed', code: 'tool_succeeded', ...outputDigestOf(text), output: { text, bytes: text.length, truncated: false } };
    },
    ...(options.inspect === false
      ? {}
      : {
          async inspect(ticket): Promise<InspectAnswer> {
            const text = outputs.get(ticket.startId);
            return text === undefined ? { state: 'not_started' } : { state: 'succeeded', output: { text, bytes: text.length, truncated: false } };
          },
        }),
  };
  const tool: Tool = { name: 'echo', adapter, definition: { schema: { type: 'object' } }, timeoutMs: 1000 };
  return { tool, effects: () => [...effects.values()].reduce((a, b) => a + b, 0) };
};

/** A fresh in-memory authority and its execution for each spec of the block, closed after it. */
const eachOpen = (): { authority: RecoverableStartBarrierAuthority; execution: ExecutionAuthority } => {
  const open = {} as { authority: RecoverableStartBarrierAuthority; execution: ExecutionAuthority };
  beforeEach(async () => {
    open.authority = await openMemoryStartBarrier({ plans: { ...TEST_PLANS, maxPlanBytes: 1024 } });
    open.execution = openExecution(open.authority, { execution: 'enabled' });
  });
  afterEach(async () => {
    await open.execution.close();
    await open.authority.close();
  });
  return open;
};

describe('R11.2 R12.2 runTool and recover: one call per tool call (in-memory)', () => {
  const open = eachOpen();

  it('R11.1 given a new Run and call, when runTool runs, then the Run and StepRun are made, the tool runs once and its output is returned, not recorded', async () => {
    const { tool, effects } = echoTool();
    const result = await runTool(open.execution, { runId: 'run-1', callId: 'call-1', tool, input: { query: 'orders' } });
    expect(result.status).to.equal('completed');
    expect(result.invoked).to.equal(true);
    expect(JSON.parse(result.output!.text)).to.deep.equal({ echoed: { query: 'orders' } });
    expect(effects()).to.equal(1);
    expect(result.outcome?.outcomeDigest).to.equal(outputDigestOf(result.output!.text).outputDigest);
    const stream = JSON.stringify(await open.authority.runs.readStream('run-1'));
    expect(stream).to.not.include('echoed');
    expect((await open.authority.runs.getStepRun('run-1', 'call-1'))?.status).to.equal('completed');
  });

  it('R4.2 given a finished call, when runTool is called again with the same arguments, then nothing is written or invoked and the outcome is returned', async () => {
    const { tool, effects } = echoTool({ inspect: false });
    const call = { runId: 'run-1', callId: 'call-1', tool, input: { query: 'orders' } };
    const first = await runTool(open.execution, call);
    const events = (await open.authority.runs.readStream('run-1')).length;
    const again = await runTool(open.execution, call);
    expect(again).to.include({ status: 'completed', invoked: false, startId: first.startId, output: null });
    expect(again.outputGone).to.match(/cannot give the output back/);
    expect((await open.authority.runs.readStream('run-1')).length).to.equal(events);
    expect(effects()).to.equal(1);
  });

  it('R4.2 given two first calls of one call id racing, when both run, then each settles the same attempt: one side effect, no precondition error', async () => {
    const { tool, effects } = echoTool();
    const call = { runId: 'run-race', callId: 'call-1', tool, input: { query: 'orders' } };
    const results = await Promise.all([runTool(open.execution, call, { waitForClaims: false }), runTool(open.execution, call, { waitForClaims: false })]);
    expect(new Set(results.map((r) => r.startId)).size).to.equal(1);
    for (const r of results) expect(['completed', 'in_doubt']).to.include(r.status);
    expect(results.some((r) => r.status === 'completed' && r.invoked)).to.equal(true);
    expect(effects()).to.equal(1);
    expect((await open.authority.runs.getStepRun('run-race', 'call-1'))?.status).to.equal('completed');
  });

  it('R11.2 given a lost response, when runTool is called again, then it inspects, records the outcome and returns the output without a second side effect', async () => {
    const { tool, effects } = echoTool({ loseFirstAnswer: true });
    const call = { runId: 'run-1', callId: 'call-1', tool, input: { n: 1 } };
    const first = await runTool(open.execution, call);
    expect(first).to.include({ status: 'in_doubt', why: 'start_unknown', output: null });
    const again = await runTool(open.execution, call);
    expect(again).to.include({ status: 'completed', invoked: false, startId: first.startId });
    expect(JSON.parse(again.output!.text)).to.deep.equal({ echoed: { n: 1 } });
    expect(effects()).to.equal(1);
  });

  it('R11.2 given a start in doubt, when recover() runs, then it settles it from the sealed plan and reports nothing left in doubt', async () => {
    const { tool, effects } = echoTool({ loseFirstAnswer: true });
    await runTool(open.execution, { runId: 'run-1', callId: 'call-1', tool, input: { n: 1 } });
    expect(await open.authority.recovery.inDoubt()).to.have.length(1);
    const report = await recover(open.execution, { tools: [tool] });
    expect(report).to.include({ settled: 1, inDoubt: 0 });
    expect(report.starts[0]).to.include({ status: 'completed', callId: 'call-1' });
    expect(await open.authority.recovery.inDoubt()).to.have.length(0);
    expect(effects()).to.equal(1);
  });

  it('R11.2 given another driver inside the tool, when runTool is called with waitForClaims false, then it reports the live claim and its lease end, and invokes nothing', async () => {
    const { tool } = echoTool();
    let reached!: () => void;
    const atTool = new Promise<void>((resolve) => (reached = resolve));
    // a driver that is still inside the tool (its answer never comes)
    const stuck: Tool = { ...tool, adapter: { ...tool.adapter, start: () => (reached(), new Promise<never>(() => undefined)) } };
    const call = { runId: 'run-1', callId: 'call-1', tool: stuck, input: { n: 1 } };
    void runTool(open.execution, call);
    await atTool;
    const seen = await runTool(open.execution, { ...call, tool }, { waitForClaims: false });
    expect(seen).to.include({ status: 'in_doubt', why: 'claimed_elsewhere', invoked: false, output: null });
    expect(seen.holder?.generation).to.equal(1);
    expect(seen.holder?.leaseUntilMs).to.be.a('number');
    const report = await recover(open.execution, { tools: [tool], waitForClaims: false });
    expect(report).to.include({ settled: 0, inDoubt: 1 });
    expect(report.starts[0]).to.include({ why: 'claimed_elsewhere' });
  });

  it('R11.2 given a start whose adapter no tool provides, when recover() runs, then it reports it in doubt and touches nothing', async () => {
    const { tool } = echoTool({ loseFirstAnswer: true });
    await runTool(open.execution, { runId: 'run-1', callId: 'call-1', tool, input: null });
    const report = await recover(open.execution, { tools: [] });
    expect(report).to.include({ settled: 0, inDoubt: 1 });
    expect(report.starts[0]).to.include({ status: 'no_tool', adapter: REF.id });
  });
});

describe('R10.1 runTool bad input: a typed error naming the field, nothing written, no side effect (in-memory)', () => {
  const open = eachOpen();

  const refused = async (call: unknown): Promise<{ code: string; issues?: { path: string; message: string }[]; fields?: readonly string[]; message: string }> => {
    try {
      await runTool(open.execution, call as Parameters<typeof runTool>[1]);
    } catch (e) {
      if (!isStartBarrierError(e)) throw e;
      return e as never;
    }
    throw new Error('runTool did not refuse');
  };

  it('R10.1 given no tool, an id outside the id alphabet, or an input over the plan limit, then VALIDATION_FAILED names the field and nothing is written', async () => {
    const { tool, effects } = echoTool();
    const missing = await refused({ runId: 'run-1', callId: 'call-1', input: {} });
    expect(missing.code).to.equal('VALIDATION_FAILED');
    expect(missing.issues?.[0]?.path).to.equal('tool');
    const badId = await refused({ runId: 'run-1', callId: 'tools/search?q=1', tool, input: {} });
    expect(badId.issues?.[0]?.path).to.equal('callId');
    expect(badId.issues?.[0]?.message).to.match(/A-Z a-z 0-9 \. _ -/).and.match(/map any other id/);
    const big = await refused({ runId: 'run-1', callId: 'call-1', tool, input: { text: 'x'.repeat(2000) } });
    expect(big.code).to.equal('VALIDATION_FAILED');
    expect(big.issues?.[0]).to.include({ path: 'input', reason: 'too_large' });
    expect(await open.authority.runs.readStream('run-1')).to.have.length(0);
    expect(effects()).to.equal(0);
  });

  it('R4.3 given a call id used before, when it is called with another input or tool, then SEMANTIC_CONFLICT names the fields and nothing is written', async () => {
    const { tool, effects } = echoTool();
    await runTool(open.execution, { runId: 'run-1', callId: 'call-1', tool, input: { n: 1 } });
    const events = (await open.authority.runs.readStream('run-1')).length;
    const other = await refused({ runId: 'run-1', callId: 'call-1', tool, input: { n: 2 } });
    expect(other.code).to.equal('SEMANTIC_CONFLICT');
    expect(other.fields).to.deep.equal(['input']);
    expect(other.message).to.include('input');
    const longer = await refused({ runId: 'run-1', callId: 'call-1', tool: { ...tool, timeoutMs: 5000 }, input: { n: 1 } });
    expect(longer.fields).to.deep.equal(['tool.timeoutMs']);
    const redefined = await refused({ runId: 'run-1', callId: 'call-1', tool: { ...tool, definition: { v: 2 } }, input: { n: 1 } });
    expect(redefined.fields).to.deep.equal(['tool.definition']);
    const elsewhere = await refused({ runId: 'run-1', callId: 'call-2', tool, input: { n: 1 }, projectId: 'project-2' });
    expect(elsewhere.fields).to.deep.equal(['projectId']);
    expect((await open.authority.runs.readStream('run-1')).length).to.equal(events);
    expect(effects()).to.equal(1);
  });
});
