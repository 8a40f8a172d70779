import { Identity, decodeOrThrow, type Ref } from '../../domain/codecs';
import { checkedHttpOptions } from './options';
import { INSPECT_STATES, RETURNED_OUTPUT_BYTES, boundedText, outputDigestOf, type AdapterAnswer, type AdapterReport, type ExecutionTicket, type InspectAnswer, type InspectReport, type InvocationPlan, type ToolAdapter, type ToolCallTelemetry } from '../../domain';
import { admitTicket } from '../../application/execution';
import { annotateToolCall } from '../../application/telemetry';

// The HTTP adapter (R11.4): POSTs the tool input with `Idempotency-Key: <startId>`, bounded by
// the barrier's timeout. A tool that honours the key makes a repeated start harmless; a tool
// with a status endpoint lets `inspect` answer after a lost response, otherwise inspect says
// `unknown`. Only the response's digest and size reach a record; the body goes back to the
// caller (bounded: ToolOutput), and a status endpoint may give it back after a crash
// (`{ "state": "succeeded", "output": "..." }`).
//
// Redirects are never followed (R12.3): a followed 307 would send the tool input, the
// Idempotency-Key and the configured headers to another origin, and a 302 answered there would
// read as the tool's success. A 3xx from the tool is an unknown outcome (it may have acted
// before redirecting), and from the status endpoint an `unknown` state.

export interface HttpAdapterOptions {
  readonly ref: Ref;
  /** The tool's endpoint (configuration of the reviewed adapter, never part of a record). */
  readonly url: string;
  /**
   * `GET <statusUrl>/<startId>` answers 404 (never started) or 200 `{ "state": ... }` with one
   * of not_started, running, succeeded, failed, unknown; an `"output"` string beside it is the
   * tool's response body, returned to the caller (never recorded).
   */
  readonly statusUrl?: string;
  /** The tool dedupes on Idempotency-Key (default true: say false for a tool that does not). */
  readonly honoursIdempotencyKey?: boolean;
  /** Response bytes digested at most (default 16 MiB); a longer body is an unknown outcome. */
  readonly maxResponseBytes?: number;
  readonly headers?: Readonly<Record<string, string>>;
}

/** Read at most `max` bytes of a body, refusing (not buffering) anything longer. */
const readBounded = async (res: Response, max: number): Promise<Uint8Array> => {
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (declared > max) {
    await res.body?.cancel().catch(() => undefined);
    throw new Error(`response of ${declared} bytes is over the ${max}-byte bound`);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = res.body?.getReader();
  for (;;) {
    const next = await reader?.read();
    if (next === undefined || next.done) break;
    size += next.value.byteLength;
    if (size > max) {
      await reader!.cancel().catch(() => undefined);
      throw new Error(`response is over the ${max}-byte bound`);
    }
    chunks.push(next.value);
  }
  return Buffer.concat(chunks);
};

/** A redirect, or what `redirect: 'manual'` makes of one where the platform hides it. */
const isRedirect = (res: Response): boolean => res.type === 'opaqueredirect' || (res.status >= 300 && res.status < 400);

/** Host and port of a URL, as `server.address` and `server.port` (the scheme's default port when none is written). */
export const serverOf = (url: URL): Record<string, string | number> => ({
  'server.address': url.hostname.replace(/^\[|\]$/g, ''),
  'server.port': url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port),
});

/**
 * The tool call as an HTTP client span (semantic conventions: the method as its name): the
 * endpoint without its userinfo, query or fragment, which may hold credentials.
 */
const httpCallTelemetry = (endpoint: string): ToolCallTelemetry => {
  const url = new URL(endpoint);
  return {
    spanName: 'POST',
    kind: 'client',
    attributes: { 'http.request.method': 'POST', 'url.full': `${url.protocol}//${url.host}${url.pathname}`, ...serverOf(url) },
  };
};

export const httpAdapter = (input: HttpAdapterOptions): ToolAdapter => {
  const options = checkedHttpOptions(input);
  const max = options.maxResponseBytes ?? 16 * 1024 * 1024;
  const idempotent = options.honoursIdempotencyKey ?? true;

  const start = async (ticket: ExecutionTicket, plan: InvocationPlan): Promise<AdapterReport | AdapterAnswer> => {
    // R12.1: a minted ticket and its opened plan, or no request is made.
    const context = admitTicket(ticket, options.ref, 'start', plan);
    const startId = decodeOrThrow(Identity, 'startId', context.barrier.startId);
    // Any transport failure, timeout included, rejects: the outcome is unknown, not failed.
    const res = await fetch(options.url, {
      method: 'POST',
      headers: { ...options.headers, 'content-type': 'application/json', 'idempotency-key': startId },
      body: JSON.stringify(plan.input ?? null),
      redirect: 'manual',
      signal: AbortSignal.timeout(context.timeoutMs),
    });
    if (isRedirect(res)) {
      await res.body?.cancel().catch(() => undefined);
      throw new Error(`HTTP ${res.status}: the tool redirected and a redirect is never followed; outcome unknown`);
    }
    // By the HTTP conventions a 4xx or 5xx answer is an error whose type is its status code.
    annotateToolCall({ 'http.response.status_code': res.status, ...(res.status >= 400 ? { 'error.type': String(res.status) } : {}) });
    const body = await readBounded(res, max);
    // A server error or a key still in flight (409) says nothing certain about the side effect.
    if (res.status >= 500 || res.status === 409 || res.status === 408 || res.status === 429) throw new Error(`HTTP ${res.status}: outcome unknown`);
    const out = outputDigestOf(body);
    const output = { ...boundedText(body, RETURNED_OUTPUT_BYTES), bytes: body.byteLength };
    return res.ok ? { outcome: 'completed', code: 'tool_succeeded', ...out, output } : { outcome: 'failed', code: 'tool_failed', ...out, output };
  };

  const inspect = async (ticket: ExecutionTicket): Promise<InspectReport | InspectAnswer> => {
    const startId = decodeOrThrow(Identity, 'startId', admitTicket(ticket, options.ref, 'inspect').startId);
    if (options.statusUrl === undefined) return { state: 'unknown' };
    try {
      const res = await fetch(`${options.statusUrl.replace(/\/$/, '')}/${encodeURIComponent(startId)}`, { headers: { ...options.headers }, redirect: 'manual', signal: AbortSignal.timeout(10_000) });
      if (isRedirect(res)) {
        await res.body?.cancel().catch(() => undefined);
        return { state: 'unknown' };
      }
      if (res.status === 404) return { state: 'not_started' };
      if (!res.ok) return { state: 'unknown' };
      const json = JSON.parse(Buffer.from(await readBounded(res, RETURNED_OUTPUT_BYTES + 64 * 1024)).toString('utf8')) as { state?: unknown; output?: unknown };
      if (!(INSPECT_STATES as readonly unknown[]).includes(json.state)) return { state: 'unknown' };
      const state = json.state as InspectReport['state'];
      if (typeof json.output !== 'string' || (state !== 'succeeded' && state !== 'failed')) return { state };
      const body = Buffer.from(json.output, 'utf8');
      return { state, output: { ...boundedText(body, RETURNED_OUTPUT_BYTES), bytes: body.byteLength } };
    } catch {
      return { state: 'unknown' };
    }
  };

  return {
    declaration: { kind: 'http', ref: options.ref, guarantees: { idempotentStart: idempotent, enforcesTimeout: true } },
    telemetry: httpCallTelemetry(options.url),
    start,
    ...(options.statusUrl === undefined ? {} : { inspect }),
  };
};
