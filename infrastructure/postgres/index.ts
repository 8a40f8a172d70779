// `@qinglong/start-barrier/postgres`: the cluster authority (R5.2), on `pg` (node-postgres).
export {
  openPostgresStartBarrier,
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
