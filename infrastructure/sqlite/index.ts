// `@qinglong/start-barrier/sqlite`: the embedded authority (edge, standalone), R5.1.
import { openSqliteStartBarrier as openSqlite, type SqliteStartBarrier, type SqliteStartBarrierOptions } from './sqliteAuthority';
import { withTelemetry } from '../../application/telemetry';
export type { SqliteStartBarrier, SqliteStartBarrierOptions, SqliteStartBarrierSettings } from './sqliteAuthority';
export type { SqliteDatabase, SqliteStatement, SqliteRunResult } from './database';

/** Opens (creating and migrating) the SQLite authority; with OpenTelemetry spans when `@opentelemetry/api` is installed. */
export const openSqliteStartBarrier = async (options: SqliteStartBarrierOptions): Promise<SqliteStartBarrier> =>
  withTelemetry(await openSqlite(options), undefined, { 'db.system.name': 'sqlite', ...(typeof options?.path === 'string' ? { 'db.namespace': options.path } : {}) });
// The authority's types and the surface both driver subpaths share (application/storeSurface.ts).
export * from '../../application/storeSurface';
export { MigrationError, SchemaMissingError, UnreleasedStoreError } from '../migrations';
export { openSqliteRetention, type SqliteRetention, type SqliteCompactReport, type CompactionStep, COMPACTION_STEPS } from './sqliteRetention';
