// `@qinglong/start-barrier/sqlite`: the embedded authority (edge, standalone), R5.1.
import { openSqliteStartBarrier as openSqlite, type SqliteStartBarrier, type SqliteStartBarrierOptions } from './store';
import { withTelemetry } from '../telemetry';
export type { SqliteStartBarrier, SqliteStartBarrierOptions, SqliteStartBarrierSettings } from './store';
export type { SqliteDatabase, SqliteStatement, SqliteRunResult } from './database';

/** Opens (creating and migrating) the SQLite authority; with OpenTelemetry spans when `@opentelemetry/api` is installed. */
export const openSqliteStartBarrier = async (options: SqliteStartBarrierOptions): Promise<SqliteStartBarrier> => withTelemetry(await openSqlite(options));
export type { StartBarrierAuthority, PrepareResult, StoredBarrier, StepRunView, StoredEvent, AppendOutcome, StartStep, StartStepHook } from '../authority';
export { START_STEPS } from '../authority';
export { MigrationError } from '../migrations';
export { DriverMissingError, ConnectionError, type ConnectionFailure } from '../openErrors';
export { VERIFY_PHASES, type VerifyPhase, type VerifyProgressListener } from '../verifyProgress';
export type {
  RecoveryApi,
  RecoverableStartBarrierAuthority,
  InDoubtQuery,
  InDoubtStart,
  AttemptHistoryEntry,
  StartOutcome,
  ResolveResult,
  VerifyOptions,
  VerifyProblem,
  VerifyReport,
} from '../authority';
