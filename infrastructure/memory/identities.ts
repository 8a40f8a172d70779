import type { AttemptKey, ReplayIdentity } from '../../domain';
import type { BarrierRow } from '../../projections/rows';

// Where the in-memory tables keep each R4.1 identity besides the replay index: the barrier's
// own column for it. The recovery lookup is derived from this table; a new identity is one
// entry here (and one in each SQL backend's table, with its migration).

export type IdentityStorage =
  | { readonly column: keyof BarrierRow }
  | { readonly attempt: readonly ['run_id', 'step_run_id', 'started_step_run_version'] };

export const IDENTITY_STORAGE: Readonly<Record<ReplayIdentity, IdentityStorage>> = {
  startId: { column: 'start_id' },
  mutationId: { column: 'mutation_id' },
  runEventId: { column: 'run_event_id' },
  traceId: { column: 'trace_id' },
  auditEventId: { column: 'audit_event_id' },
  auditReceiptId: { column: 'audit_receipt_id' },
  attempt: { attempt: ['run_id', 'step_run_id', 'started_step_run_version'] },
};

/** Whether barrier `b` holds this identity value in its own column(s). */
export const barrierHolds = (storage: IdentityStorage, b: BarrierRow, key: string, attempt: AttemptKey | undefined): boolean =>
  'column' in storage
    ? b[storage.column] === key
    : attempt !== undefined && b.run_id === attempt.runId && b.step_run_id === attempt.stepRunId && b.started_step_run_version === attempt.startedStepRunVersion;
