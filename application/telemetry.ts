import type * as OtelApi from '@opentelemetry/api';
import { isStartBarrierError } from '../domain';
import type { AppendOutcome, PrepareResult, RecoverableStartBarrierAuthority, ResolveResult, StartBarrierAuthority, VerifyReport } from './authority';
import { isModuleMissing } from './openErrors';

// OpenTelemetry spans for prepare, lifecycle commands, resolutions and verify, when the
// application has `@opentelemetry/api` installed (an optional peer): without it, nothing here
// loads or runs. Spans start as children of the caller's active context, so a start lands in
// the trace of the request that asked for it (W3C traceparent propagation is the SDK's job),
// and each span names the barrier's own trace anchor (`start_barrier.trace_id`) to tie the
// two. Attributes are ids, counts and outcomes only, never command content (admission,
// contracts, reasons): they leave the process for a collector with other retention rules.

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

type Attributes = Record<string, string | number | boolean>;

/** The typed error's stable code (and which identity conflicted), never its message. */
const errorAttributes = (e: unknown): Attributes => {
  if (!isStartBarrierError(e)) return { 'start_barrier.outcome': 'error', 'start_barrier.error_code': e instanceof Error ? e.name : 'unknown' };
  const identity = (e as { identity?: unknown }).identity;
  return {
    'start_barrier.outcome': 'error',
    'start_barrier.error_code': e.code,
    ...(typeof identity === 'string' ? { 'start_barrier.conflict_identity': identity } : {}),
  };
};

const prepareAttributes = (r: PrepareResult): Attributes => {
  const b = r.barrier.record;
  return {
    'start_barrier.outcome': r.outcome,
    'start_barrier.start_id': b.startId,
    'start_barrier.project_id': b.projectId,
    'start_barrier.run_id': b.runId,
    'start_barrier.step_run_id': b.stepRunId,
    'start_barrier.attempt': b.attempt.startedStepRunVersion,
    'start_barrier.trace_id': b.trace.traceId,
    'start_barrier.span_id': b.trace.spanId,
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

const verifyAttributes = (r: VerifyReport): Attributes => ({
  'start_barrier.outcome': r.ok ? 'ok' : 'damaged',
  'start_barrier.problems': r.problems.length,
  'start_barrier.checked.barriers': r.checked.barriers,
  'start_barrier.checked.events': r.checked.events,
});

/**
 * The authority with spans around its decisions, or the authority itself when
 * `@opentelemetry/api` is not installed (or `api` is null). The instance is kept (its other members unchanged);
 * only `runs.handle`, `barriers.prepare`, `recovery.resolve` and `recovery.verify` are wrapped.
 */
export const withTelemetry = <A extends StartBarrierAuthority>(authority: A, api?: Otel | null): A => {
  // `null`: instrument nothing (as when the package is absent); left out: load it if installed.
  const otel = api === undefined ? loadOtel() : api;
  if (otel === undefined || otel === null) return authority;
  const tracer = otel.trace.getTracer(TRACER_NAME);
  const traced =
    <Args extends unknown[], R>(name: string, body: (...args: Args) => Promise<R>, attributesOf: (r: R) => Attributes) =>
    (...args: Args): Promise<R> =>
      tracer.startActiveSpan(name, { attributes: { 'start_barrier.backend': authority.backend } }, async (span) => {
        try {
          const result = await body(...args);
          // A span that records nothing (no SDK, or sampled out) would drop them: not built.
          if (span.isRecording()) span.setAttributes(attributesOf(result));
          return result;
        } catch (e) {
          if (span.isRecording()) span.setAttributes(errorAttributes(e));
          span.setStatus({ code: otel.SpanStatusCode.ERROR, message: isStartBarrierError(e) ? e.code : 'error' });
          throw e;
        } finally {
          span.end();
        }
      });

  const { runs, barriers } = authority;
  Object.defineProperty(authority, 'runs', {
    value: { ...bindAll(runs), handle: traced('start_barrier.lifecycle', (c: Parameters<typeof runs.handle>[0]) => runs.handle(c), appendAttributes) },
    enumerable: true,
  });
  Object.defineProperty(authority, 'barriers', {
    value: { ...bindAll(barriers), prepare: traced('start_barrier.prepare', (c: Parameters<typeof barriers.prepare>[0]) => barriers.prepare(c), prepareAttributes) },
    enumerable: true,
  });
  const recovery = (authority as Partial<RecoverableStartBarrierAuthority>).recovery;
  if (recovery !== undefined) {
    Object.defineProperty(authority, 'recovery', {
      value: {
        ...bindAll(recovery),
        resolve: traced('start_barrier.resolve', (...a: Parameters<typeof recovery.resolve>) => recovery.resolve(...a), resolveAttributes),
        verify: traced('start_barrier.verify', (...a: Parameters<typeof recovery.verify>) => recovery.verify(...a), verifyAttributes),
      },
      enumerable: true,
    });
  }
  return authority;
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
