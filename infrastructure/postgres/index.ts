// `@qinglong/start-barrier/postgres`: the cluster authority (R5.2), on `pg` (node-postgres).
// The public opener includes `recovery`, so both subpaths offer the same surface.
import { openRecoverablePostgresStartBarrier, type RecoverablePostgresStartBarrier } from './recovery';
import type { PostgresStartBarrierOptions } from './store';
import { withTelemetry } from '../telemetry';
export { postgresRecoveryOf, type RecoverablePostgresStartBarrier } from './recovery';

/** Opens the PostgreSQL authority (with `recovery`); with OpenTelemetry spans when `@opentelemetry/api` is installed. */
export const openPostgresStartBarrier = async (options: PostgresStartBarrierOptions): Promise<RecoverablePostgresStartBarrier> =>
  withTelemetry(await openRecoverablePostgresStartBarrier(options));
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
export { VERIFY_PHASES, type VerifyPhase, type VerifyProgressListener } from '../verifyProgress';
export type { PoolErrorHandler } from './pool';
