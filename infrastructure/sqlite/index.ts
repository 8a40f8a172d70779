// `@qinglong/start-barrier/sqlite`: the embedded authority (edge, standalone), R5.1.
import { openSqliteStartBarrier as openSqlite, type SqliteStartBarrier, type SqliteStartBarrierOptions } from './sqliteAuthority';
import { withTelemetry } from '../../application/telemetry';
export type { SqliteStartBarrier, SqliteStartBarrierOptions, SqliteStartBarrierSettings } from './sqliteAuthority';
export type { SqliteDatabase, SqliteStatement, SqliteRunResult } from './database';

/** Opens (creating and migrating) the SQLite authority; with OpenTelemetry spans when `@opentelemetry/api` is installed. */
export const openSqliteStartBarrier = async (options: SqliteStartBarrierOptions): Promise<SqliteStartBarrier> =>
  withTelemetry(await openSqlite(options), undefined, { 'db.system.name': 'sqlite', ...(typeof options?.path === 'string' ? { 'db.namespace': options.path } : {}) });
export type { StartBarrierAuthority, StartStep, StartStepHook } from '../../application/authority';
export type { PrepareResult, StoredBarrier, StepRunView, StoredEvent, AppendOutcome } from '../../domain/records';
export { START_STEPS } from '../../application/authority';
export { MigrationError, SchemaMissingError, UnreleasedStoreError } from '../migrations';
export { DriverMissingError, ConnectionError, type ConnectionFailure } from '../../application/openErrors';
export { VERIFY_PHASES, type VerifyPhase, type VerifyProgressListener } from '../../application/verifyProgress';
export type { RecoveryApi, RecoverableStartBarrierAuthority, InDoubtQuery, VerifyOptions } from '../../application/authority';
export type { InDoubtStart, AttemptHistoryEntry, StartOutcome, ResolveResult, VerifyProblem, VerifyReport } from '../../domain/records';
export type { EvidenceKey, EvidenceKeyringOptions } from '../../application/evidenceKeys';
export { openSqliteRetention, type SqliteRetention, type SqliteCompactReport, type CompactionStep, COMPACTION_STEPS } from './sqliteRetention';
