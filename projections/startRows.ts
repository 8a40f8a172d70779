import { canonicalJson, type EventOf, REPLAY_IDENTITIES, replayKeysOfBarrier, type ReplayIdentity, type RunStreamEvent, type StartFacts } from '../domain';
import { replayValuesOf, type AuditEventRow, type AuditReceiptRow, type BarrierRow, type MutationRow, type ReplayIdentityRow, type TraceAnchorRow } from './tableRows';

// The rows a start's five facts project to, the canonical JSON their events store, and the
// deterministic event ids of those facts.

export interface StartRows {
  audit: AuditEventRow;
  trace: TraceAnchorRow;
  receipt: AuditReceiptRow;
  mutation: MutationRow;
  barrier: BarrierRow;
  identities: ReplayIdentityRow[];
  /** The canonical JSON of the four fact payloads and of the barrier record: stored once, in their events. */
  json: KnownStartJson;
}

/** Canonical JSON already known for the fact data and the barrier record (a verified read has it). */
export interface KnownStartJson {
  readonly audit: string;
  readonly trace: string;
  readonly receipt: string;
  readonly mutation: string;
  readonly barrier: string;
}

/**
 * The rows a start's facts project to. `known`, when given, must be the canonical JSON of
 * exactly these values (the verified read passes text it has just proven canonical for them),
 * so they are not serialised a second time.
 */
export const startRowsOf = (facts: StartFacts, committedAtMs: number, known?: KnownStartJson): StartRows => {
  const [audit, trace, receipt, started, committed] = facts;
  const b = committed.data.barrier;
  const m: EventOf<'StepRunStarted'>['data'] = started.data;
  const key = { start_id: b.startId, command_digest: b.commandDigest };
  const identities = replayValuesOf(replayKeysOfBarrier(b));
  const json: KnownStartJson = known ?? {
    audit: canonicalJson(audit.data),
    trace: canonicalJson(trace.data),
    receipt: canonicalJson(receipt.data),
    mutation: canonicalJson(m),
    barrier: canonicalJson(b),
  };
  return {
    audit: {
      audit_event_id: audit.data.auditEventId,
      start_id: b.startId,
      run_id: b.runId,
      step_run_id: b.stepRunId,
      audit_event_digest: audit.data.auditEventDigest,
      committed_at_ms: committedAtMs,
    },
    trace: {
      trace_id: trace.data.traceId,
      span_id: trace.data.spanId,
      start_id: b.startId,
      run_id: b.runId,
      step_run_id: b.stepRunId,
      trace_digest: trace.data.traceDigest,
      committed_at_ms: committedAtMs,
    },
    receipt: {
      audit_receipt_id: receipt.data.auditReceiptId,
      audit_event_id: receipt.data.auditEventId,
      trace_id: receipt.data.traceId,
      start_id: b.startId,
      receipt_digest: receipt.data.receiptDigest,
      committed_at_ms: committedAtMs,
    },
    mutation: {
      mutation_id: m.mutationId,
      run_event_id: m.runEventId,
      start_id: b.startId,
      run_id: m.runId,
      step_run_id: m.stepRunId,
      from_status: m.fromStatus,
      to_status: m.toStatus,
      from_version: m.fromStepRunVersion,
      to_version: m.stepRunVersion,
      run_event_sequence: m.runEventSequence,
      mutation_digest: m.mutationDigest,
      started_step_run_digest: m.startedStepRunDigest,
      requested_at_ms: m.occurredAtMs,
      committed_at_ms: committedAtMs,
    },
    barrier: {
      start_id: b.startId,
      command_digest: b.commandDigest,
      barrier_digest: committed.data.barrierDigest,
      project_id: b.projectId,
      run_id: b.runId,
      step_run_id: b.stepRunId,
      started_step_run_version: b.attempt.startedStepRunVersion,
      started_step_run_digest: b.attempt.startedStepRunDigest,
      mutation_id: b.mutation.mutationId,
      mutation_digest: b.mutation.mutationDigest,
      run_event_id: b.runEvent.runEventId,
      trace_id: b.trace.traceId,
      trace_digest: b.trace.traceDigest,
      audit_event_id: b.audit.auditEventId,
      audit_receipt_id: b.audit.auditReceiptId,
      audit_receipt_digest: b.audit.auditReceiptDigest,
      adapter_id: b.contracts.adapter.id,
      committed_at_ms: committedAtMs,
    },
    identities: REPLAY_IDENTITIES.map((identity) => ({ identity, value: identities[identity], ...key })),
    json,
  };
};

/**
 * The canonical JSON of the five start events' data (the one place it is stored), as
 * startRowsOf canonicalised it, so a start canonicalises each fact once. The barrier event's
 * data is `{ barrier, barrierDigest }`: its keys are already in canonical (UTF-16) order.
 */
export const startEventJsonOf = (rows: StartRows): [string, string, string, string, string] => [
  rows.json.audit,
  rows.json.trace,
  rows.json.receipt,
  rows.json.mutation,
  barrierEventJson(rows.json.barrier, rows.barrier.barrier_digest),
];

/** The barrier event's data `{ barrier, barrierDigest }` from the barrier's canonical text: its keys are in canonical order. */
export const barrierEventJson = (barrierJson: string, barrierDigest: string): string => `{"barrier":${barrierJson},"barrierDigest":${JSON.stringify(barrierDigest)}}`;

/**
 * Start facts get deterministic event ids, so a damaged id is caught on read. StepRunStarted
 * carries the RunEvent id itself (it *is* the RunEvent, R3.6); the others are prefixed with a
 * kind (`:` never occurs in an identity, so they cannot collide with a RunEvent id). Each
 * prefix names the R4.1 identity whose value follows it.
 * Lifecycle events get a fresh UUID (undefined here).
 */
const EVENT_ID_PREFIX = {
  auditEventId: 'audit:',
  traceId: 'trace:',
  auditReceiptId: 'receipt:',
  startId: 'barrier:',
} as const satisfies Partial<Record<ReplayIdentity, string>>;

export const naturalEventIdOf = (e: RunStreamEvent): string | undefined => {
  switch (e.type) {
    case 'SecurityAuditEventRecorded':
      return `${EVENT_ID_PREFIX.auditEventId}${e.data.auditEventId}`;
    case 'TraceAnchorRecorded':
      return `${EVENT_ID_PREFIX.traceId}${e.data.traceId}`;
    case 'AuditReceiptIssued':
      return `${EVENT_ID_PREFIX.auditReceiptId}${e.data.auditReceiptId}`;
    case 'StepRunStarted':
      return e.data.runEventId;
    case 'ToolExecutionStartBarrierCommitted':
      return `${EVENT_ID_PREFIX.startId}${e.data.barrier.startId}`;
    default:
      return undefined;
  }
};

/** The identity an event id of a start fact carries (a unique event id refused names it). */
export const identityOfEventId = (eventId: string): ReplayIdentity => {
  for (const [identity, prefix] of Object.entries(EVENT_ID_PREFIX) as [ReplayIdentity, string][]) if (eventId.startsWith(prefix)) return identity;
  return 'runEventId';
};
