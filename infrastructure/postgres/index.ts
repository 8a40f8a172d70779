// `@qinglong/start-barrier/postgres`: the cluster authority (R5.2), on `pg` (node-postgres).
// The opener includes `recovery`, so both subpaths offer the same surface.
import { openPostgresStartBarrier as openPostgres, type PostgresStartBarrier, type PostgresStartBarrierOptions } from './postgresAuthority';
import type { PoolConfig } from 'pg';
import { withTelemetry, type DatabaseAttributes } from '../../application/telemetry';

/** Opens the PostgreSQL authority (with `recovery`); with OpenTelemetry spans when `@opentelemetry/api` is installed. */
export const openPostgresStartBarrier = async (options: PostgresStartBarrierOptions): Promise<PostgresStartBarrier> => {
  const authority = await openPostgres(options);
  return withTelemetry(authority, undefined, databaseAttributesOf(authority.pool.options as PoolConfig));
};

/** The database the pool connects to, as the conventions name it: its name, host and port (never the user or password). */
const databaseAttributesOf = (config: PoolConfig): DatabaseAttributes => {
  let url: URL | undefined;
  try {
    url = config.connectionString === undefined ? undefined : new URL(config.connectionString);
  } catch {
    url = undefined; // a key=value connection string: only what the config names
  }
  const database = config.database ?? (url?.pathname.slice(1) || undefined);
  const host = typeof config.host === 'string' ? config.host : url?.hostname || undefined;
  const port = config.port ?? (url?.port ? Number(url.port) : undefined);
  return {
    'db.system.name': 'postgresql',
    ...(database === undefined ? {} : { 'db.namespace': decodeURIComponent(database) }),
    ...(host === undefined ? {} : { 'server.address': host }),
    ...(port === undefined || !Number.isFinite(Number(port)) ? {} : { 'server.port': Number(port) }),
  };
};
export {
  DEFAULT_TIMEOUTS,
  DEFAULT_MAX_RETRIES,
  type PostgresStartBarrier,
  type PostgresStartBarrierOptions,
  type PostgresTimeouts,
  type PostgresWriteMode,
  type RecoverablePostgresStartBarrier,
} from './postgresAuthority';
export { postgresRecoveryOf } from './postgresRecovery';
export { migratePostgres, assertSchemaCurrent, type MigrationReport } from './migrate';
// The authority's types and the surface both driver subpaths share (application/storeSurface.ts).
export * from '../../application/storeSurface';
export { MigrationError, SchemaMissingError, UnreleasedStoreError } from '../migrations';
export type { PoolErrorHandler } from './pool';
export { settleStart, isSettleable, DEFAULT_SETTLE_DEADLINE_MS, type SettleOptions } from '../../application/settle';
export { openPostgresRetention, postgresRetentionOn, type PostgresRetention, type PostgresCompactReport, type PgCompactionStep, PG_COMPACTION_STEPS } from './postgresRetention';
