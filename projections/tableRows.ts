import { type ReplayIdentity, type ReplayKeys } from '../domain';

// The rows of the inline projections' tables, as every backend stores them (column names are
// the SQL column names, snake_case, on both backends), and the stored value of each replay
// identity.

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
