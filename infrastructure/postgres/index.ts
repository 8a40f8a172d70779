// `@qinglong/start-barrier/postgres`: the cluster authority (R5.2), on `pg` (node-postgres).
// The opener includes `recovery`, so both subpaths offer the same surface.
import { openPostgresStartBarrier as openPostgres, type PostgresStartBarrier, type PostgresStartBarrierOptions } from './postgresAuthority';
import { withTelemetry } from '../../application/telemetry';

/** Opens the PostgreSQL authority (with `recovery`); with OpenTelemetry spans when `@opentelemetry/api` is installed. */
export const openPostgresStartBarrier = async (options: PostgresStartBarrierOptions): Promise<PostgresStartBarrier> => withTelemetry(await openPostgres(options));
export {
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
export { MigrationError, SchemaMissingError } from '../migrations';
export { DriverMissingError, ConnectionError, type ConnectionFailure } from '../../application/openErrors';
export { VERIFY_PHASES, type VerifyPhase, type VerifyProgressListener } from '../../application/verifyProgress';
export type { PoolErrorHandler } from './pool';
export type { EvidenceKey, EvidenceKeyringOptions } from '../../application/evidenceKeys';
