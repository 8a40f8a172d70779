// `@qinglong/start-barrier/postgres`: the cluster authority (R5.2), on `pg` (node-postgres).
// The public opener includes `recovery`, so both subpaths offer the same surface.
export { openRecoverablePostgresStartBarrier as openPostgresStartBarrier, postgresRecoveryOf, type RecoverablePostgresStartBarrier } from './postgresRecoveryView';
export {
  DEFAULT_TIMEOUTS,
  DEFAULT_MAX_RETRIES,
  type PostgresStartBarrier,
  type PostgresStartBarrierOptions,
  type PostgresTimeouts,
  type PostgresWriteMode,
} from './postgresAuthority';
export { migratePostgres, assertSchemaCurrent, type MigrationReport } from './migrate';
export type { StartBarrierAuthority, PrepareResult, StoredBarrier, StepRunView, StoredEvent, AppendOutcome, StartStep, StartStepHook } from '../../application/authority';
export { START_STEPS } from '../../application/authority';
export { MigrationError } from '../migrations';
