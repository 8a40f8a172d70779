// `@qinglong/start-barrier/postgres`: the cluster authority (R5.2), on `pg` (node-postgres).
// The opener includes `recovery`, so both subpaths offer the same surface.
export {
  openPostgresStartBarrier,
  DEFAULT_TIMEOUTS,
  DEFAULT_MAX_RETRIES,
  type PostgresStartBarrier,
  type PostgresStartBarrierOptions,
  type PostgresTimeouts,
  type PostgresWriteMode,
  type RecoverablePostgresStartBarrier,
} from './postgresAuthority';
export { postgresRecoveryOf } from './postgresRecoveryView';
export { migratePostgres, assertSchemaCurrent, type MigrationReport } from './migrate';
export type { StartBarrierAuthority, PrepareResult, StoredBarrier, StepRunView, StoredEvent, AppendOutcome, StartStep, StartStepHook } from '../../application/authority';
export { START_STEPS } from '../../application/authority';
export { MigrationError } from '../migrations';
export type { EvidenceKey, EvidenceKeyringOptions } from '../../application/evidenceKeys';
