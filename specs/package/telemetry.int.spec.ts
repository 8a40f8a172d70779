import { AsyncLocalStorage } from 'node:async_hooks';
import * as otel from '@opentelemetry/api';
import { expect } from 'chai';
import { buildScenario } from '../../domain/scenario';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { openPostgresStartBarrier } from '../../infrastructure/postgres';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { TRACER_NAME, withTelemetry } from '../../application/telemetry';
import { openMemoryStartBarrier } from '../../infrastructure/memory/testing';
import { createDatabase, type TestDatabase } from '../../testkit/postgresHarness';
import { rejects } from '../../testkit/rejects';
import { freshDbPath } from '../support/tmp';

// R6.1: with `@opentelemetry/api` installed, prepare, lifecycle commands, resolutions and
// verify emit spans carrying ids and outcomes, never command content. A recording tracer
// provider stands in for an SDK (the API is what the package talks to).

interface Recorded {
  readonly name: string;
  readonly attributes: Record<string, unknown>;
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
  recordException = () => undefined;
}

const tracer = {
  startSpan(name: string, options?: otel.SpanOptions, ctx?: otel.Context): otel.Span {
    const record: Recorded = { name, attributes: { ...options?.attributes }, ended: false, parent: otel.trace.getSpan(ctx ?? otel.context.active()) };
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

const ALLOWED = /^start_barrier\.(backend|outcome|start_id|project_id|run_id|step_run_id|attempt|trace_id|span_id|committed_at_ms|run_version|events|resolution|problems|checked\.barriers|checked\.events|error_code|conflict_identity)$/;

describe('R6.1 OpenTelemetry spans (optional peer @opentelemetry/api)', function () {
  this.timeout(60_000);
  let pg: TestDatabase;
  before(async () => {
    expect(otel.context.setGlobalContextManager(contextManager)).to.equal(true);
    expect(otel.trace.setGlobalTracerProvider({ getTracer: (name: string) => (name === TRACER_NAME ? tracer : otel.trace.getTracerProvider().getTracer(name)) })).to.equal(true);
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
        'start_barrier.trace_id': command.evidence.traceId,
      });
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

  it('R6.1 without @opentelemetry/api the authority is returned as it is (nothing wrapped)', async () => {
    const authority = await openMemoryStartBarrier();
    const { runs, barriers } = authority;
    expect(withTelemetry(authority, null)).to.equal(authority);
    expect([authority.runs, authority.barriers]).to.deep.equal([runs, barriers]);
  });
});
