import {
  canonicalJson,
  canonicalJsonOf,
  stepRunDigest,
  type EventOf,
  REPLAY_IDENTITIES,
  replayKeysOfBarrier,
  type ReplayIdentity,
  type ReplayKeys,
  type RunHead,
  type RunStreamEvent,
  type StartFacts,
  type StepRunState,
} from '../domain';

// Inline projections, as pure row derivations shared by every backend: the stores write these
// rows in the same transaction as the events, and the rebuild specs derive them again from the
// event log and compare. Column names are the SQL column names (snake_case) on both backends.

export interface RunRow {
  run_id: string;
  project_id: string;
  snapshot_id: string;
  snapshot_digest: string;
  version: number;
}

export interface StepRunRow {
  run_id: string;
  step_run_id: string;
  project_id: string;
  kind: string;
  status: string;
  version: number;
  digest: string;
  /** Canonical JSON of the StepRun state, decoded and re-digested on read. */
  state_json: string;
}

export interface AuditEventRow {
  audit_event_id: string;
  start_id: string;
  run_id: string;
  step_run_id: string;
  audit_event_digest: string;
  committed_at_ms: number;
}
export interface TraceAnchorRow {
  trace_id: string;
  span_id: string;
  start_id: string;
  run_id: string;
  step_run_id: string;
  trace_digest: string;
  committed_at_ms: number;
}
export interface AuditReceiptRow {
  audit_receipt_id: string;
  audit_event_id: string;
  trace_id: string;
  start_id: string;
  receipt_digest: string;
  committed_at_ms: number;
}
/** The StepRun mutation ledger (R3.6): one row per StepRun move made by a start. */
export interface MutationRow {
  mutation_id: string;
  run_event_id: string;
  start_id: string;
  run_id: string;
  step_run_id: string;
  from_status: string;
  to_status: string;
  from_version: number;
  to_version: number;
  run_event_sequence: number;
  mutation_digest: string;
  started_step_run_digest: string;
  requested_at_ms: number;
  committed_at_ms: number;
}
/**
 * Barrier read model: its digest and mirror columns (R5.3). The canonical JSON of the barrier,
 * as of every fact, is stored once, in the data of its event.
 */
export interface BarrierRow {
  start_id: string;
  command_digest: string;
  barrier_digest: string;
  project_id: string;
  run_id: string;
  step_run_id: string;
  started_step_run_version: number;
  started_step_run_digest: string;
  mutation_id: string;
  mutation_digest: string;
  run_event_id: string;
  trace_id: string;
  trace_digest: string;
  audit_event_id: string;
  audit_receipt_id: string;
  audit_receipt_digest: string;
  adapter_id: string;
  committed_at_ms: number;
}
/** Replay-identity index (R4.1): one row per identity, each unique on (identity, value). */
export interface ReplayIdentityRow {
  identity: ReplayIdentity;
  value: string;
  start_id: string;
  command_digest: string;
}

/** The canonical JSON of the attempt key: an array of two strings and a number, which the native serialiser prints canonically (no keys to sort). */
export const attemptValue = (runId: string, stepRunId: string, startedStepRunVersion: number): string =>
  JSON.stringify([runId, stepRunId, startedStepRunVersion]);

/** The stored value of each R4.1 identity (the attempt key as its canonical JSON), derived here only. */
export const replayValuesOf = (keys: ReplayKeys): Readonly<Record<ReplayIdentity, string>> => ({
  startId: keys.startId,
  mutationId: keys.mutationId,
  runEventId: keys.runEventId,
  traceId: keys.traceId,
  auditEventId: keys.auditEventId,
  auditReceiptId: keys.auditReceiptId,
  attempt: attemptValue(keys.attempt.runId, keys.attempt.stepRunId, keys.attempt.startedStepRunVersion),
});

/** The R4.1 keys a barrier row mirrors: the probes of its read (a damaged mirror finds other rows, and fails the check). */
export const replayKeysOfBarrierRow = (b: BarrierRow): ReplayKeys => ({
  startId: b.start_id,
  mutationId: b.mutation_id,
  runEventId: b.run_event_id,
  traceId: b.trace_id,
  auditEventId: b.audit_event_id,
  auditReceiptId: b.audit_receipt_id,
  attempt: { runId: b.run_id, stepRunId: b.step_run_id, startedStepRunVersion: Number(b.started_step_run_version) },
});

export const runRowOf = (run: RunHead): RunRow => ({
  run_id: run.runId,
  project_id: run.projectId,
  snapshot_id: run.snapshotId,
  snapshot_digest: run.snapshotDigest,
  version: run.version,
});

export const stepRunRowOf = (s: StepRunState): StepRunRow => ({
  run_id: s.runId,
  step_run_id: s.stepRunId,
  project_id: s.projectId,
  kind: s.kind,
  status: s.status,
  version: s.version,
  digest: stepRunDigest(s),
  state_json: canonicalJsonOf(s),
});

/**
 * stepRunRowOf for the StepRun a start leaves: `from` moved to running at `version`, its attempt
 * `startId`, and `digest` that state's digest as the decider computed it (startedStepRunDigest).
 * Built in canonical key order, field by field, so its state JSON prints natively.
 */
export const startedStepRunRowOf = (from: StepRunState, version: number, startId: string, digest: string): StepRunRow => {
  const state: Record<string, unknown> = from.approval ? { approval: from.approval } : {};
  state.kind = from.kind;
  state.lastStartId = startId;
  state.projectId = from.projectId;
  state.runId = from.runId;
  state.status = 'running';
  state.stepRunId = from.stepRunId;
  if (from.toolDefinition) state.toolDefinition = from.toolDefinition;
  state.version = version;
  return {
    run_id: from.runId,
    step_run_id: from.stepRunId,
    project_id: from.projectId,
    kind: from.kind,
    status: 'running',
    version,
    digest,
    state_json: canonicalJsonOf(state),
  };
};

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
