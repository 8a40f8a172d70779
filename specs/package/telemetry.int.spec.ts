import { AsyncLocalStorage } from 'node:async_hooks';
import * as otel from '@opentelemetry/api';
import { expect } from 'chai';
import { buildScenario } from '../../domain/scenario';
import { ValidationError } from '../../domain';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { openPostgresStartBarrier } from '../../infrastructure/postgres';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { TRACER_NAME, withTelemetry } from '../../application/telemetry';
import { openMemoryStartBarrier } from '../../infrastructure/memory/testing';
import { createDatabase, type TestDatabase } from '../../testkit/postgresHarness';
import { rejects } from '../../testkit/rejects';
import { freshDbPath, freshDir } from '../support/tmp';
import { join } from 'node:path';
import { createToolStepSaga, openExecution } from '../../application/saga';
import { httpAdapter } from '../../infrastructure/adapters/http';
import { mcpAdapter } from '../../infrastructure/adapters/mcp';
import { startHttpTool } from '../../testkit/adapters/tools';
import { ADAPTER_REFS, readyToolCall } from '../../testkit/adapters/toolCall';
import { TEST_PLANS } from '../../testkit/planKeys';

// R6.1: with `@opentelemetry/api` installed, prepare, lifecycle commands, resolutions and
// verify emit spans carrying ids and outcomes, never command content. A recording tracer
// provider stands in for an SDK (the API is what the package talks to).

interface Recorded {
  readonly name: string;
  readonly kind: otel.SpanKind;
  readonly attributes: Record<string, unknown>;
  readonly exceptions: otel.Exception[];
  status?: otel.SpanStatus;
  ended: boolean;
  readonly parent: otel.Span | undefined;
}

const recorded: Recorded[] = [];

class RecordingSpan implements otel.Span {
  constructor(readonly record: Recorded) {}
  spanContext = (): otel.SpanContext => ({ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: 1 });
  setAttribute = (key: string, value: otel.AttributeValue) => ((this.record.attributes[key] = value), this);
  setAttributes = (attributes: otel.Attributes) => (Object.assign(this.record.attributes, attributes), this);
  addEvent = () => this;
  addLink = () => this;
  addLinks = () => this;
  setStatus = (status: otel.SpanStatus) => ((this.record.status = status), this);
  updateName = () => this;
  end = () => void (this.record.ended = true);
  isRecording = () => true;
  recordException = (e: otel.Exception) => void this.record.exceptions.push(e);
}

const tracer = {
  startSpan(name: string, options?: otel.SpanOptions, ctx?: otel.Context): otel.Span {
    const record: Recorded = { name, kind: options?.kind ?? otel.SpanKind.INTERNAL, attributes: { ...options?.attributes }, exceptions: [], ended: false, parent: otel.trace.getSpan(ctx ?? otel.context.active()) };
    recorded.push(record);
    return new RecordingSpan(record);
  },
  startActiveSpan(name: string, ...rest: unknown[]): unknown {
    const fn = rest[rest.length - 1] as (span: otel.Span) => unknown;
    const options = (rest.length > 1 ? rest[0] : {}) as otel.SpanOptions;
    const span = tracer.startSpan(name, options);
    return otel.context.with(otel.trace.setSpan(otel.context.active(), span), fn, undefined, span);
  },
} as unknown as otel.Tracer;

/** What an SDK's async-hooks context manager does: the active span follows async calls. */
const storage = new AsyncLocalStorage<otel.Context>();
const contextManager: otel.ContextManager = {
  active: () => storage.getStore() ?? otel.ROOT_CONTEXT,
  with: (ctx, fn, thisArg, ...args) => storage.run(ctx, () => fn.call(thisArg, ...args)),
  bind: (_ctx, target) => target,
  enable: () => contextManager,
  disable: () => contextManager,
};

const ALLOWED =
  /^(start_barrier\.(backend|outcome|start_id|project_id|run_id|step_run_id|attempt|trace_id|trace_anchor_id|span_id|committed_at_ms|run_version|events|resolution|in_doubt|problems|checked\.barriers|checked\.events|error_code|conflict_identity)|db\.(system\.name|namespace|operation\.name)|server\.(address|port)|error\.type)$/;
/** The tracers asked for, by name and version. */
const tracersAsked: [string, string | undefined][] = [];

describe('R6.1 OpenTelemetry spans (optional peer @opentelemetry/api)', function () {
  this.timeout(60_000);
  let pg: TestDatabase;
  before(async () => {
    expect(otel.context.setGlobalContextManager(contextManager)).to.equal(true);
    expect(otel.trace.setGlobalTracerProvider({ getTracer: (name: string, version?: string) => (tracersAsked.push([name, version]), tracer) })).to.equal(true);
    pg = await createDatabase();
  });
  after(async () => {
    otel.trace.disable();
    otel.context.disable();
    await pg.drop();
  });
  beforeEach(() => {
    recorded.length = 0;
  });

  const walkthrough = async (authority: RecoverableStartBarrierAuthority) => {
    const s = buildScenario();
    for (const c of s.lifecycle) await authority.runs.handle(c);
    const command = s.startCommand();
    const created = await authority.barriers.prepare(command);
    await authority.barriers.prepare(command);
    await rejects(authority.barriers.prepare({ ...command, startId: `${command.startId}-other` }));
    await authority.recovery.inDoubt({ limit: 10 });
    await authority.recovery.resolve(created.barrier.record.startId, 'completed', { decidedBy: 'spec', reason: 'checked_tool_log' });
    await authority.recovery.verify();
    return { s, command, created };
  };

  for (const [backend, open] of [
    ['sqlite', () => openSqliteStartBarrier({ path: freshDbPath('otel') })],
    ['postgres', () => openPostgresStartBarrier({ connectionString: pg.url })],
  ] as const) {
    it(`R6.1 ${backend}: prepare, lifecycle, resolve and verify each end one span with ids and outcome; failures carry the typed code`, async () => {
      const authority = await open();
      let run;
      try {
        run = await walkthrough(authority);
      } finally {
        await authority.close();
      }
      const { s, command } = run;
      const top = recorded.filter((r) => r.parent === undefined);
      expect(top.map((r) => r.name)).to.deep.equal([
        'start_barrier.lifecycle',
        'start_barrier.lifecycle',
        'start_barrier.lifecycle',
        'start_barrier.prepare',
        'start_barrier.prepare',
        'start_barrier.prepare',
        'start_barrier.in_doubt',
        'start_barrier.resolve',
        'start_barrier.verify',
      ]);
      expect(recorded.every((r) => r.ended)).to.equal(true);
      const [created, replayed, refused] = top.filter((r) => r.name === 'start_barrier.prepare');
      expect(created!.attributes).to.include({
        'start_barrier.backend': backend,
        'start_barrier.outcome': 'created',
        'start_barrier.start_id': command.startId,
        'start_barrier.run_id': s.runId,
        'start_barrier.step_run_id': s.stepRunId,
        'start_barrier.attempt': command.stepRun.expectedVersion + 1,
        'start_barrier.trace_anchor_id': command.evidence.traceId,
      });
      // R6.1 database CLIENT spans by the conventions, from a tracer named and versioned
      expect(tracersAsked).to.deep.include([TRACER_NAME, (require('../../package.json') as { version: string }).version]);
      for (const r of top) {
        expect(r.kind, r.name).to.equal(otel.SpanKind.CLIENT);
        expect(r.attributes, r.name).to.include({ 'db.system.name': backend === 'sqlite' ? 'sqlite' : 'postgresql', 'db.operation.name': r.name });
        expect(r.attributes['db.namespace'], r.name).to.be.a('string').and.not.equal('');
        if (backend === 'postgres') expect(r.attributes, r.name).to.include({ 'server.address': '127.0.0.1', 'server.port': 5432, 'db.namespace': pg.name });
        else expect(r.attributes, r.name).not.to.have.property('server.address');
      }
      expect(top.find((r) => r.name === 'start_barrier.in_doubt')!.attributes).to.include({ 'start_barrier.outcome': 'listed', 'start_barrier.in_doubt': 1 });
      // a failure: error.type, an exception event (class and code, not the message), status ERROR
      expect(refused!.attributes).to.include({ 'error.type': 'SEMANTIC_CONFLICT' });
      expect(refused!.exceptions).to.deep.equal([{ name: 'SemanticConflictError', message: 'SEMANTIC_CONFLICT', code: 'SEMANTIC_CONFLICT' }]);
      expect(replayed!.attributes['start_barrier.outcome']).to.equal('existing');
      expect(refused!.attributes).to.include({ 'start_barrier.outcome': 'error', 'start_barrier.error_code': 'SEMANTIC_CONFLICT' });
      expect(refused!.status?.code).to.equal(otel.SpanStatusCode.ERROR);
      expect(top.find((r) => r.name === 'start_barrier.verify')!.attributes).to.include({ 'start_barrier.outcome': 'ok', 'start_barrier.problems': 0 });

      // Ids and outcomes only: no attribute outside the list, no value from the command's content.
      const content = [command.admission.actionDigest, command.admission.profile, command.admission.policyFence.policyId, command.handlerBinding.id, 'checked_tool_log'];
      for (const r of recorded) {
        for (const [key, value] of Object.entries(r.attributes)) {
          expect(key, r.name).to.match(ALLOWED);
          expect(content, `${r.name} ${key}`).not.to.include(value);
        }
      }
    });
  }

  it('R6.1 a span starts as a child of the caller active span, so a start joins the trace of the request that asked for it', async () => {
    const authority = withTelemetry(await openMemoryStartBarrier(), otel);
    const s = buildScenario();
    const parent = tracer.startSpan('http request');
    await otel.context.with(otel.trace.setSpan(otel.context.active(), parent), async () => {
      for (const c of s.lifecycle) await authority.runs.handle(c);
    });
    expect(recorded.filter((r) => r.name === 'start_barrier.lifecycle').map((r) => r.parent)).to.deep.equal([parent, parent, parent]);
  });

  it("R6.1 a start names its W3C trace: the active context's trace id, or its anchor's traceparent's; the anchor's own id apart", async () => {
    const authority = withTelemetry(await openMemoryStartBarrier(), otel);
    const caller = '4bf92f3577b34da6a3ce929d0e0e4736';
    const parent = otel.trace.wrapSpanContext({ traceId: caller, spanId: '00f067aa0ba902b7', traceFlags: 1 });
    const s = buildScenario();
    for (const c of s.lifecycle) await authority.runs.handle(c);
    await otel.context.with(otel.trace.setSpan(otel.context.active(), parent), () => authority.barriers.prepare(s.startCommand()));
    const fromContext = recorded.filter((r) => r.name === 'start_barrier.prepare').pop()!;
    expect(fromContext.attributes).to.include({ 'start_barrier.trace_id': caller, 'start_barrier.trace_anchor_id': s.startCommand().evidence.traceId });
    expect(fromContext.parent).to.equal(parent);

    const t = buildScenario();
    for (const c of t.lifecycle) await authority.runs.handle(c);
    const plain = t.startCommand();
    await authority.barriers.prepare({ ...plain, evidence: { ...plain.evidence, traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' } });
    expect(recorded.filter((r) => r.name === 'start_barrier.prepare').pop()!.attributes).to.include({ 'start_barrier.trace_id': '0af7651916cd43dd8448eb211c80319c' });
    // no active context and no traceparent: no W3C trace id is made up
    const u = buildScenario();
    for (const c of u.lifecycle) await authority.runs.handle(c);
    await authority.barriers.prepare(u.startCommand());
    expect(recorded.filter((r) => r.name === 'start_barrier.prepare').pop()!.attributes).not.to.have.property('start_barrier.trace_id');
  });

  for (const [backend, open] of [
    ['memory', async () => withTelemetry(await openMemoryStartBarrier(), otel)],
    ['sqlite', () => openSqliteStartBarrier({ path: freshDbPath('otel-anchor') })],
    ['postgres', () => openPostgresStartBarrier({ connectionString: pg.url })],
  ] as const) {
    it(`R6.1 R4.2 ${backend}: a new start records the active W3C trace id on its trace anchor; a replay from another trace is existing and answers the stored one`, async () => {
      const authority: RecoverableStartBarrierAuthority = await open();
      try {
        const creating = '4bf92f3577b34da6a3ce929d0e0e4736';
        const other = '5c0a3f4688c45eb7b4df03ae1f1f5847';
        const inTrace = <T>(traceId: string, body: () => Promise<T>) =>
          otel.context.with(otel.trace.setSpan(otel.context.active(), otel.trace.wrapSpanContext({ traceId, spanId: '00f067aa0ba902b7', traceFlags: 1 })), body);
        const s = buildScenario();
        for (const c of s.lifecycle) await authority.runs.handle(c);
        const command = s.startCommand();
        const created = await inTrace(creating, () => authority.barriers.prepare(command));
        expect(created.outcome).to.equal('created');
        expect(created.barrier.record.trace).to.include({ w3cTraceId: creating, traceId: command.evidence.traceId });
        // not a field of the command: a replay from another trace (or none) is exact
        for (const replay of [await inTrace(other, () => authority.barriers.prepare(command)), await authority.barriers.prepare(command)]) {
          expect(replay.outcome).to.equal('existing');
          expect(replay.barrier.barrierDigest).to.equal(created.barrier.barrierDigest);
          expect(replay.barrier.record.trace.w3cTraceId).to.equal(creating);
        }
        expect(recorded.filter((r) => r.name === 'start_barrier.prepare').map((r) => r.attributes['start_barrier.trace_id'])).to.deep.equal([creating, creating, creating]);
        expect((await authority.barriers.getByStartId(command.startId))?.record.trace.w3cTraceId).to.equal(creating);
        expect((await authority.recovery.verify()).problems).to.deep.equal([]);
        // a context given by hand is checked like any input: typed, naming the field, nothing written
        const t = buildScenario();
        for (const c of t.lifecycle) await authority.runs.handle(c);
        const refused = await rejects(authority.barriers.prepare(t.startCommand(), { w3cTraceId: '0'.repeat(32) }));
        expect(refused).to.be.instanceOf(ValidationError);
        expect((refused as ValidationError).issues.map((i) => i.path)).to.deep.equal(['w3cTraceId']);
        expect(await authority.barriers.getByStartId(t.startCommand().startId)).to.equal(null);
      } finally {
        await authority.close();
      }
    });
  }

  it("R6.1 the saga's drive is a span, and its HTTP tool call a CLIENT span by the HTTP conventions (method, url.full without credentials or query, server.address/port, response status code)", async () => {
    const dir = freshDir('otel-saga');
    const tool = await startHttpTool(dir);
    const authority = await openSqliteStartBarrier({ path: join(dir, 'barrier.db'), plans: TEST_PLANS });
    const execution = openExecution(authority, { execution: 'enabled' });
    try {
      const call = await readyToolCall(authority, 'http', { n: 1 }, 10_000);
      const url = new URL(tool.url);
      // userinfo (which fetch refuses anyway) and the query may hold credentials: neither is kept
      expect(httpAdapter({ ref: ADAPTER_REFS.http, url: `${url.protocol}//user:secret@${url.host}/x?token=abc` }).telemetry?.attributes['url.full']).to.equal(`${url.protocol}//${url.host}/x`);
      const adapter = httpAdapter({ ref: ADAPTER_REFS.http, url: `${tool.url}?token=abc` });
      recorded.length = 0;
      const result = await createToolStepSaga({ execution, adapter }).drive(call.trigger, call.plan, call.invocation);
      expect(result.status).to.equal('completed');
      const drive = recorded.find((r) => r.name === 'start_barrier.drive')!;
      expect(drive.parent).to.equal(undefined);
      expect(drive.attributes).to.include({ 'start_barrier.outcome': 'completed', 'start_barrier.start_id': result.barrier.record.startId, 'start_barrier.run_id': call.trigger.runId });
      const post = recorded.find((r) => r.name === 'POST')!;
      expect(post.kind).to.equal(otel.SpanKind.CLIENT);
      expect(post.attributes).to.include({ 'http.request.method': 'POST', 'url.full': `${url.protocol}//${url.host}${url.pathname}`, 'server.address': '127.0.0.1', 'server.port': Number(url.port), 'http.response.status_code': 200, 'start_barrier.outcome': 'completed' });
      // only the tool invocation's span takes the response status: the drive's does not
      expect(drive.attributes).not.to.have.property('http.response.status_code');
      expect(JSON.stringify(post.attributes)).not.to.match(/secret|token/);
      // prepare, the in-doubt read and the outcome run inside the drive
      expect(recorded.filter((r) => r.name === 'start_barrier.prepare' || r.name === 'start_barrier.resolve').every((r) => r.parent !== undefined)).to.equal(true);
      expect(recorded.every((r) => r.ended)).to.equal(true);

      // a tool that answers 422: a failed outcome, and the CLIENT span's error.type is the status code (the HTTP conventions)
      tool.mode = 'fail';
      const refusedCall = await readyToolCall(authority, 'http', { n: 3 }, 10_000);
      recorded.length = 0;
      expect((await createToolStepSaga({ execution, adapter }).drive(refusedCall.trigger, refusedCall.plan, refusedCall.invocation)).status).to.equal('failed');
      expect(recorded.find((r) => r.name === 'POST')!.attributes).to.include({ 'http.response.status_code': 422, 'error.type': '422' });
      tool.mode = 'ok';

      // a tool call that fails at the transport: the CLIENT span has error.type and an exception; the drive ends in doubt
      await tool.close();
      const next = await readyToolCall(authority, 'http', { n: 2 }, 2_000);
      recorded.length = 0;
      const lost = await createToolStepSaga({ execution, adapter: httpAdapter({ ref: ADAPTER_REFS.http, url: tool.url }) }).drive(next.trigger, next.plan, next.invocation);
      expect(lost.status).to.equal('in_doubt');
      const failed = recorded.find((r) => r.name === 'POST')!;
      expect(failed.status?.code).to.equal(otel.SpanStatusCode.ERROR);
      expect(failed.attributes['error.type']).to.be.a('string');
      expect(failed.exceptions).to.have.length(1);
      expect(recorded.find((r) => r.name === 'start_barrier.drive')!.attributes).to.include({ 'start_barrier.outcome': 'in_doubt', 'start_barrier.in_doubt_why': 'start_unknown' });
    } finally {
      await execution.close();
      await authority.close();
    }
  });

  it('R6.1 an MCP tool call is described as a CLIENT span by the MCP conventions (tools/call <tool>, mcp.method.name, gen_ai.tool.name, rpc.*)', () => {
    const overHttp = mcpAdapter({ ref: ADAPTER_REFS.mcp, transport: { kind: 'http', url: 'https://tools.example:8443/mcp?key=x' }, tool: 'act' });
    expect(overHttp.telemetry).to.deep.equal({
      spanName: 'tools/call act',
      kind: 'client',
      attributes: {
        'mcp.method.name': 'tools/call',
        'gen_ai.tool.name': 'act',
        'gen_ai.operation.name': 'execute_tool',
        'rpc.system': 'jsonrpc',
        'rpc.method': 'tools/call',
        'rpc.jsonrpc.version': '2.0',
        'network.transport': 'tcp',
        'network.protocol.name': 'http',
        'server.address': 'tools.example',
        'server.port': 8443,
      },
    });
    const overStdio = mcpAdapter({ ref: ADAPTER_REFS.mcp, transport: { kind: 'stdio', command: '/bin/true' }, tool: 'act' });
    expect(overStdio.telemetry?.attributes).to.include({ 'network.transport': 'pipe', 'mcp.method.name': 'tools/call' }).and.not.have.property('server.address');
  });

  it('R6.1 without @opentelemetry/api the authority is returned as it is (nothing wrapped)', async () => {
    const authority = await openMemoryStartBarrier();
    const { runs, barriers } = authority;
    expect(withTelemetry(authority, null)).to.equal(authority);
    expect([authority.runs, authority.barriers]).to.deep.equal([runs, barriers]);
  });
});
