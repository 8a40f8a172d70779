import type { AuditEventRow, AuditReceiptRow, BarrierRow, MutationRow, RunRow, StepRunRow, TraceAnchorRow } from '../../projections/rows';

// The columns of each table the PostgreSQL backend writes and reads back, from the projection
// row types, so a column can neither be forgotten nor misspelt (sql.ts, barrierReadSql.ts).

const cols = <R>(columns: readonly (keyof R & string)[]) => columns;
export const AUDIT_COLUMNS = cols<AuditEventRow>(['audit_event_id', 'start_id', 'run_id', 'step_run_id', 'audit_event_digest', 'committed_at_ms']);
export const TRACE_COLUMNS = cols<TraceAnchorRow>(['trace_id', 'span_id', 'start_id', 'run_id', 'step_run_id', 'trace_digest', 'committed_at_ms']);
export const RECEIPT_COLUMNS = cols<AuditReceiptRow>(['audit_receipt_id', 'audit_event_id', 'trace_id', 'start_id', 'receipt_digest', 'committed_at_ms']);
export const MUTATION_COLUMNS = cols<MutationRow>([
  'mutation_id', 'run_event_id', 'start_id', 'run_id', 'step_run_id', 'from_status', 'to_status', 'from_version', 'to_version',
  'run_event_sequence', 'mutation_digest', 'started_step_run_digest', 'requested_at_ms', 'committed_at_ms',
]);
export const BARRIER_COLUMNS = cols<BarrierRow>([
  'start_id', 'command_digest', 'barrier_digest', 'project_id', 'run_id', 'step_run_id', 'started_step_run_version',
  'started_step_run_digest', 'mutation_id', 'mutation_digest', 'run_event_id', 'trace_id', 'trace_digest', 'audit_event_id',
  'audit_receipt_id', 'audit_receipt_digest', 'adapter_id', 'committed_at_ms',
]);
export const RUN_COLUMNS = cols<RunRow>(['run_id', 'project_id', 'snapshot_id', 'snapshot_digest', 'version']);
export const STEP_RUN_COLUMNS = cols<StepRunRow>(['run_id', 'step_run_id', 'project_id', 'kind', 'status', 'version', 'digest', 'state_json']);
