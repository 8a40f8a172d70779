import type * as OtelApi from '@opentelemetry/api';
import { isStartBarrierError, type ToolAdapter } from '../domain';
import type { RecoverableStartBarrierAuthority, StartBarrierAuthority } from './authority';
import type { AppendOutcome, InDoubtStart, PrepareResult, ResolveResult, VerifyReport } from '../domain/records';
import { isModuleMissing } from './openErrors';

// OpenTelemetry spans for prepare, lifecycle commands, the in-doubt listing, resolutions and
// verify (database CLIENT spans, with the semantic conventions' db.* and server.* attributes),
// and for the saga's drive and the tool invocation it makes (a CLIENT span for an adapter that
// calls another service, HTTP or MCP, with that protocol's attributes), when the application
// has `@opentelemetry/api` installed (an optional peer): without it, nothing here loads or runs.
// Spans start as children of the caller's active context, so a start lands in the trace of the
// request that asked for it (W3C traceparent propagation is the SDK's job). A new start records
// the active context's W3C trace id on its trace anchor (`w3cTraceId`, not part of the command:
// a replay from another trace stays `existing` and answers the stored one). A start's span names
// its W3C trace (`start_barrier.trace_id`: its anchor's traceparent's, else the trace that
// created it, else the active context's) and the barrier's own trace anchor
// (`start_barrier.trace_anchor_id`). A
// failure sets `error.type`, records an exception event and the ERROR status. Attributes are
// ids, counts and outcomes only, never command content (admission, contracts, reasons) nor an
// error's message: they leave the process for a collector with other retention rules.

export const TRACER_NAME = '@qinglong/start-barrier';

type Otel = typeof OtelApi;

const loadOtel = (): Otel | undefined => {
  try {
    return require('@opentelemetry/api') as Otel;
  } catch (e) {
    if (isModuleMissing(e, '@opentelemetry/api')) return undefined;
    throw e;
  }
};

/** This package's version, for the tracer (read once; a bundle without its package.json says so). */
let version: string | undefined;
export const packageVersion = (): string => {
  if (version === undefined) {
    try {
      version = (require('@qinglong/start-barrier/package.json') as { version: string }).version;
    } catch {
      version = 'unknown';
    }
  }
  return version;
};

/** The tracer of this package, named and versioned as the conventions ask. */
export const tracerOf = (otel: Otel): OtelApi.Tracer => otel.trace.getTracer(TRACER_NAME, packageVersion());

type Attributes = Record<string, string | number | boolean>;

/** Where the authority's database is, as the database conventions name it (`db.*`, `server.*`). */
export type DatabaseAttributes = Readonly<Attributes>;

/** `error.type`: the typed error's stable code, else the error's class name. */
const errorTypeOf = (e: unknown): string => (isStartBarrierError(e) ? e.code : e instanceof Error ? e.name : '_OTHER');

/** The typed error's stable code (and which identity conflicted), never its message. */
const errorAttributes = (e: unknown): Attributes => {
  const identity = (e as { identity?: unknown } | null)?.identity;
  return {
    'error.type': errorTypeOf(e),
    'start_barrier.outcome': 'error',
    'start_barrier.error_code': errorTypeOf(e),
    ...(isStartBarrierError(e) && typeof identity === 'string' ? { 'start_barrier.conflict_identity': identity } : {}),
  };
};

/**
 * A failure as the conventions have it: `error.type`, an exception event (its class and stable
 * code, not its message, which may quote what the caller sent) and the ERROR status.
 */
const recordFailure = (otel: Otel, span: OtelApi.Span, e: unknown): void => {
  if (span.isRecording()) {
    span.setAttributes(errorAttributes(e));
    span.recordException({ name: e instanceof Error ? e.name : 'Error', message: errorTypeOf(e), ...(isStartBarrierError(e) ? { code: e.code } : {}) });
  }
  span.setStatus({ code: otel.SpanStatusCode.ERROR, message: errorTypeOf(e) });
};

/** The W3C trace id of a traceparent (`00-<trace id>-<span id>-<flags>`), or undefined. */
const traceIdOfTraceparent = (traceparent: unknown): string | undefined =>
  typeof traceparent === 'string' ? /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/.exec(traceparent)?.[1] : undefined;

/** The W3C trace id of the caller's active context, when it has a valid one. */
const activeTraceId = (otel: Otel): string | undefined => {
  const parent = otel.trace.getSpanContext(otel.context.active());
  return parent !== undefined && otel.isSpanContextValid(parent) ? parent.traceId : undefined;
};

const prepareAttributes = (r: PrepareResult, callerTraceId: string | undefined): Attributes => {
  const b = r.barrier.record;
  const w3c = traceIdOfTraceparent(b.trace.traceparent) ?? b.trace.w3cTraceId ?? callerTraceId;
  return {
    'start_barrier.outcome': r.outcome,
    'start_barrier.start_id': b.startId,
    'start_barrier.project_id': b.projectId,
    'start_barrier.run_id': b.runId,
    'start_barrier.step_run_id': b.stepRunId,
    'start_barrier.attempt': b.attempt.startedStepRunVersion,
    'start_barrier.trace_anchor_id': b.trace.traceId,
    'start_barrier.span_id': b.trace.spanId,
    ...(w3c === undefined ? {} : { 'start_barrier.trace_id': w3c }),
    'start_barrier.committed_at_ms': r.barrier.committedAtMs,
  };
};

const appendAttributes = (r: AppendOutcome): Attributes => {
  const first = r.events[0]?.event as { type?: unknown; data?: { runId?: unknown; stepRunId?: unknown } } | undefined;
  return {
    'start_barrier.outcome': 'appended',
    'start_barrier.run_version': r.runVersion,
    'start_barrier.events': r.events.map((e) => e.event.type).join(','),
    ...(typeof first?.data?.runId === 'string' ? { 'start_barrier.run_id': first.data.runId } : {}),
    ...(typeof first?.data?.stepRunId === 'string' ? { 'start_barrier.step_run_id': first.data.stepRunId } : {}),
  };
};

const resolveAttributes = (r: ResolveResult): Attributes => ({
  'start_barrier.outcome': r.status,
  'start_barrier.start_id': r.outcome.startId,
  'start_barrier.run_id': r.outcome.runId,
  'start_barrier.step_run_id': r.outcome.stepRunId,
  'start_barrier.resolution': r.outcome.outcome,
});

const inDoubtAttributes = (r: readonly InDoubtStart[]): Attributes => ({ 'start_barrier.outcome': 'listed', 'start_barrier.in_doubt': r.length });

const verifyAttributes = (r: VerifyReport): Attributes => ({
  'start_barrier.outcome': r.ok ? 'ok' : 'damaged',
  'start_barrier.problems': r.problems.length,
  'start_barrier.checked.barriers': r.checked.barriers,
  'start_barrier.checked.events': r.checked.events,
});

/** The attributes a backend names itself by when it gives none (the in-memory store). */
const DATABASE_OF_BACKEND: Readonly<Record<string, DatabaseAttributes>> = {
  sqlite: { 'db.system.name': 'sqlite' },
  postgres: { 'db.system.name': 'postgresql' },
  memory: { 'db.system.name': 'other_sql' },
};

/**
 * The authority with spans around its decisions, or the authority itself when
 * `@opentelemetry/api` is not installed (or `api` is null). The instance is kept (its other
 * members unchanged); only `runs.handle`, `barriers.prepare`, `recovery.inDoubt`,
 * `recovery.resolve` and `recovery.verify` are wrapped. `database`: where the store is
 * (`db.namespace`, `server.address`, `server.port`), put on every span.
 */
export const withTelemetry = <A extends StartBarrierAuthority>(authority: A, api?: Otel | null, database?: DatabaseAttributes): A => {
  // `null`: instrument nothing (as when the package is absent); left out: load it if installed.
  const otel = api === undefined ? loadOtel() : api;
  if (otel === undefined || otel === null) return authority;
  const tracer = tracerOf(otel);
  const db = { ...(DATABASE_OF_BACKEND[authority.backend] ?? {}), ...database };
  const traced =
    <Args extends unknown[], R>(operation: string, body: (...args: Args) => Promise<R>, attributesOf: (r: R, callerTraceId: string | undefined) => Attributes) =>
    (...args: Args): Promise<R> => {
      const callerTraceId = activeTraceId(otel);
      const attributes = { 'start_barrier.backend': authority.backend, ...db, 'db.operation.name': operation };
      return tracer.startActiveSpan(operation, { kind: otel.SpanKind.CLIENT, attributes }, async (span) => {
        try {
          const result = await body(...args);
          // A span that records nothing (no SDK, or sampled out) would drop them: not built.
          if (span.isRecording()) span.setAttributes(attributesOf(result, callerTraceId));
          return result;
        } catch (e) {
          recordFailure(otel, span, e);
          throw e;
        } finally {
          span.end();
        }
      });
    };

  const { runs, barriers } = authority;
  type PrepareArgs = Parameters<typeof barriers.prepare>;
  const tracedPrepare = traced('start_barrier.prepare', (c: PrepareArgs[0], context?: PrepareArgs[1]) => barriers.prepare(c, context), prepareAttributes);
  Object.defineProperty(authority, 'runs', {
    value: { ...bindAll(runs), handle: traced('start_barrier.lifecycle', (c: Parameters<typeof runs.handle>[0]) => runs.handle(c), appendAttributes) },
    enumerable: true,
  });
  Object.defineProperty(authority, 'barriers', {
    value: {
      ...bindAll(barriers),
      // The caller's active trace (read before this span makes one) goes with the attempt, to
      // be recorded on a new start's anchor; a context the caller gives is theirs.
      prepare: (c: PrepareArgs[0], context?: PrepareArgs[1]) => {
        const w3cTraceId = context === undefined ? activeTraceId(otel) : undefined;
        return tracedPrepare(c, w3cTraceId === undefined ? context : { w3cTraceId });
      },
    },
    enumerable: true,
  });
  const recovery = (authority as Partial<RecoverableStartBarrierAuthority>).recovery;
  if (recovery !== undefined) {
    Object.defineProperty(authority, 'recovery', {
      value: {
        ...bindAll(recovery),
        inDoubt: traced('start_barrier.in_doubt', (...a: Parameters<typeof recovery.inDoubt>) => recovery.inDoubt(...a), inDoubtAttributes),
        resolve: traced('start_barrier.resolve', (...a: Parameters<typeof recovery.resolve>) => recovery.resolve(...a), resolveAttributes),
        verify: traced('start_barrier.verify', (...a: Parameters<typeof recovery.verify>) => recovery.verify(...a), verifyAttributes),
      },
      enumerable: true,
    });
  }
  return authority;
};

/** What the saga's spans need: one around a drive, one around the tool invocation. */
export interface SagaTelemetry {
  drive<R extends { readonly status: string; readonly barrier: { readonly record: { readonly startId: string } } }>(
    trigger: { readonly runId: string; readonly stepRunId: string },
    body: () => Promise<R>,
  ): Promise<R>;
  invoke<R>(adapter: ToolAdapter, startId: string, body: () => Promise<R>): Promise<R>;
}

/** The tool invocation spans the saga has open: only these take what an adapter reports of its call. */
const toolCallSpans = new WeakSet<OtelApi.Span>();
let otelOfToolCalls: Otel | null | undefined;

/**
 * Attributes an adapter learns during its call (the HTTP response's status code), put on the
 * tool invocation span when the call runs inside one; outside a saga's span (or without
 * `@opentelemetry/api`) nothing is done, so a caller's own span is never written to.
 */
export const annotateToolCall = (attributes: Attributes): void => {
  if (otelOfToolCalls === undefined) otelOfToolCalls = loadOtel() ?? null;
  const span = otelOfToolCalls?.trace.getActiveSpan();
  if (span !== undefined && toolCallSpans.has(span) && span.isRecording()) span.setAttributes(attributes);
};

const UNTRACED: SagaTelemetry = { drive: (_t, body) => body(), invoke: (_a, _s, body) => body() };

/**
 * Spans for a saga: `start_barrier.drive` (INTERNAL) around each drive, and the tool invocation
 * as the adapter describes it (`adapter.telemetry`: a CLIENT span named and attributed by the
 * HTTP or MCP conventions), else an INTERNAL `start_barrier.tool` span. A drive that ends in
 * doubt is not an error of the drive (its status says so); an invocation that throws is.
 */
export const sagaTelemetry = (api?: Otel | null): SagaTelemetry => {
  const otel = api === undefined ? loadOtel() : api;
  if (otel === undefined || otel === null) return UNTRACED;
  const tracer = tracerOf(otel);
  const run = <R>(name: string, options: OtelApi.SpanOptions, body: () => Promise<R>, after: (r: R) => Attributes, toolCall = false): Promise<R> =>
    tracer.startActiveSpan(name, options, async (span) => {
      if (toolCall) toolCallSpans.add(span);
      try {
        const r = await body();
        if (span.isRecording()) span.setAttributes(after(r));
        return r;
      } catch (e) {
        recordFailure(otel, span, e);
        throw e;
      } finally {
        span.end();
      }
    });
  return {
    drive: (trigger, body) =>
      run('start_barrier.drive', { kind: otel.SpanKind.INTERNAL, attributes: { 'start_barrier.run_id': trigger.runId, 'start_barrier.step_run_id': trigger.stepRunId } }, body, (r) => ({
        'start_barrier.outcome': r.status,
        'start_barrier.start_id': r.barrier.record.startId,
        ...('why' in r && typeof r.why === 'string' ? { 'start_barrier.in_doubt_why': r.why } : {}),
      })),
    invoke: (adapter, startId, body) => {
      const described = adapter.telemetry;
      const base = { 'start_barrier.adapter_kind': adapter.declaration.kind, 'start_barrier.start_id': startId };
      return run(
        described?.spanName ?? 'start_barrier.tool',
        { kind: described?.kind === 'client' ? otel.SpanKind.CLIENT : otel.SpanKind.INTERNAL, attributes: { ...base, ...described?.attributes } },
        body,
        (r) => {
          const outcome = (r as { outcome?: unknown } | null)?.outcome;
          return typeof outcome === 'string' ? { 'start_barrier.outcome': outcome } : {};
        },
        true,
      );
    },
  };
};

/** The object's methods bound to it, as own properties (they may live on a prototype). */
const bindAll = <T extends object>(api: T): T => {
  const out: Record<string, unknown> = {};
  for (let o: object | null = api; o !== null && o !== Object.prototype; o = Object.getPrototypeOf(o) as object | null) {
    for (const key of Object.getOwnPropertyNames(o)) {
      const v = (api as Record<string, unknown>)[key];
      if (key !== 'constructor' && !(key in out)) out[key] = typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(api) : v;
    }
  }
  return out as T;
};
