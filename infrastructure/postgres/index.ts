// `@qinglong/start-barrier/postgres`: the cluster authority (R5.2), on `pg` (node-postgres).
// The public opener includes `recovery`, so both subpaths offer the same surface.
export { openRecoverablePostgresStartBarrier as openPostgresStartBarrier, postgresRecoveryOf, type RecoverablePostgresStartBarrier } from './recovery';
export {
  DEFAULT_TIMEOUTS,
  DEFAULT_MAX_RETRIES,
  type PostgresStartBarrier,
  type PostgresStartBarrierOptions,
  type PostgresTimeouts,
  type PostgresWriteMode,
} from './store';
export { migratePostgres, assertSchemaCurrent, type MigrationReport } from './migrate';
export type { StartBarrierAuthority, PrepareResult, StoredBarrier, StepRunView, StoredEvent, AppendOutcome, StartStep, StartStepHook } from '../authority';
export { START_STEPS } from '../authority';
export { MigrationError } from '../migrations';
export { DriverMissingError, ConnectionError, type ConnectionFailure } from '../openErrors';
export type { PoolErrorHandler } from './pool';
