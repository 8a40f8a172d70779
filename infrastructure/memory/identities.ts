import type { AttemptKey, ReplayIdentity } from '../../domain';
import type { BarrierRow } from '../../projections/rows';
import { checkEventRow } from '../../domain/eventRows';
import type { Tables } from './tables';

// Where the in-memory tables keep each R4.1 identity besides the replay index: the barrier's
// own column for it. The recovery lookup is derived from this table; a new identity is one
// entry here (and one in each SQL backend's table, with its migration).

/** The fact that holds an identity too (as the SQL backends look it up): its table, or the StepRunStarted event. */
type Fact = 'mutations' | 'trace' | 'audit' | 'receipts' | 'startedEvent';

export type IdentityStorage =
  | { readonly column: keyof BarrierRow; readonly fact?: Fact }
  | { readonly attempt: readonly ['run_id', 'step_run_id', 'started_step_run_version'] };

export const IDENTITY_STORAGE: Readonly<Record<ReplayIdentity, IdentityStorage>> = {
  startId: { column: 'start_id' },
  mutationId: { column: 'mutation_id', fact: 'mutations' },
  runEventId: { column: 'run_event_id', fact: 'startedEvent' },
  traceId: { column: 'trace_id', fact: 'trace' },
  auditEventId: { column: 'audit_event_id', fact: 'audit' },
  auditReceiptId: { column: 'audit_receipt_id', fact: 'receipts' },
  attempt: { attempt: ['run_id', 'step_run_id', 'started_step_run_version'] },
};

/**
 * The start a fact names under this identity value: a start whose barrier and index rows are
 * gone is still named by its facts, so a lookup of it fails closed (R9.3).
 */
export const factStartIds = (storage: IdentityStorage, t: Tables, key: string): string[] => {
  if (!('fact' in storage) || storage.fact === undefined) return [];
  if (storage.fact === 'startedEvent') {
    const event = t.events.find((e) => e.event_id === key && e.event_type === 'StepRunStarted');
    return event === undefined ? [] : [(checkEventRow(event).data as { startId: string }).startId];
  }
  const row = t[storage.fact].get(key);
  return row === undefined ? [] : [row.start_id];
};

/** Whether barrier `b` holds this identity value in its own column(s). */
export const barrierHolds = (storage: IdentityStorage, b: BarrierRow, key: string, attempt: AttemptKey | undefined): boolean =>
  'column' in storage
    ? b[storage.column] === key
    : attempt !== undefined && b.run_id === attempt.runId && b.step_run_id === attempt.stepRunId && b.started_step_run_version === attempt.startedStepRunVersion;
