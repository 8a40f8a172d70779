import * as t from 'io-ts';

// The caller's W3C Trace Context (https://www.w3.org/TR/trace-context/#traceparent-header), as
// the trace anchor may carry it: the distributed trace the start belongs to, beside the
// anchor's own traceId/spanId (which are replay identities, unique per start, so they cannot
// be a shared W3C trace-id). Strict: version 00 only, lowercase hex, no all-zero ids.

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/;

export const traceparentProblem = (s: string): string | undefined => {
  const m = TRACEPARENT.exec(s);
  if (m === null) return 'traceparent must be a W3C traceparent: 00-<32 lowercase hex trace-id>-<16 lowercase hex parent-id>-<2 hex flags>';
  if (/^0+$/.test(m[1]!)) return 'traceparent trace-id must not be all zeros';
  if (/^0+$/.test(m[2]!)) return 'traceparent parent-id must not be all zeros';
  return undefined;
};

/**
 * A W3C trace id (32 lowercase hex, not all zeros): the trace the attempt that created a start
 * ran in, as the caller's active OpenTelemetry context named it. Not part of the command.
 */
export const W3cTraceId = new t.Type<string, string, unknown>(
  'W3cTraceId',
  (u): u is string => typeof u === 'string' && /^[0-9a-f]{32}$/.test(u) && !/^0+$/.test(u),
  (u, c) =>
    typeof u === 'string' && /^[0-9a-f]{32}$/.test(u) && !/^0+$/.test(u) ? t.success(u) : t.failure(u, c, 'invalid_value|expected a W3C trace id: 32 lowercase hex, not all zeros'),
  t.identity,
);

/** Reasons ride in the io-ts message as `reason|text`, as every codec of the domain does. */
export const Traceparent = new t.Type<string, string, unknown>(
  'Traceparent',
  (u): u is string => typeof u === 'string' && traceparentProblem(u) === undefined,
  (u, c) => {
    const problem = typeof u === 'string' ? traceparentProblem(u) : 'expected a string (Traceparent)';
    return problem === undefined ? t.success(u as string) : t.failure(u, c, `invalid_value|${problem}`);
  },
  t.identity,
);
