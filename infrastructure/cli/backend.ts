import { existsSync, statSync } from 'node:fs';
import type { PoolClient } from 'pg';
import { ValidationError } from '../../domain';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { keyringFromEnvironment } from './keyring';
import { planKeyringFrom } from './planKeyring';

// `--db PATH` (SQLite, the default backend) or `--postgres URL`; environment fallbacks for
// scripts: QINGLONG_BARRIER_DB, QINGLONG_BARRIER_POSTGRES; the deployment keyring from the
// key file QINGLONG_BARRIER_KEYRING_FILE names (keyring.ts); the plan keyring from --plan-keyring
// or QINGLONG_BARRIER_PLAN_KEYRING_FILE (planKeyring.ts).

// Each backend's code is loaded by the command that uses it: a CLI process is short, and a
// SQLite command (or --help) need not load PostgreSQL's, nor the reverse.
export const backendModules = {
  pgMigrate: () => require('../postgres/migrate') as typeof import('../postgres/migrate'),
  pgAuthority: () => require('../postgres/postgresAuthority') as typeof import('../postgres/postgresAuthority'),
  pgPool: () => require('../postgres/pool') as typeof import('../postgres/pool'),
  pgErrors: () => require('../postgres/errors') as typeof import('../postgres/errors'),
  pgRetention: () => require('../postgres/postgresRetention') as typeof import('../postgres/postgresRetention'),
  sqlite: () => require('../sqlite') as typeof import('../sqlite'),
  sqliteFile: () => require('../sqlite/fileIdentity') as typeof import('../sqlite/fileIdentity'),
};

export interface BackendOptions {
  readonly db?: string;
  readonly postgres?: string;
  readonly lockTimeout?: string;
  readonly migrate?: boolean;
  /** The plan key file (planKeyring.ts); QINGLONG_BARRIER_PLAN_KEYRING_FILE otherwise. */
  readonly planKeyring?: string;
}

export class NoDatabaseError extends Error {
  constructor(path: string) {
    super(`no database at ${path} (only apply, prepare and migrate create one)`);
    this.name = 'NoDatabaseError';
  }
}

export const usage = (message: string) => new ValidationError('command line', [{ path: '(options)', reason: 'invalid_value', message }]);

export const lockTimeoutOf = (text: string | undefined): number | undefined => {
  if (text === undefined) return undefined;
  if (!/^[1-9][0-9]{0,6}$/.test(text)) throw usage(`--lock-timeout must be a whole number of milliseconds (1..9999999), got "${text}"`);
  return Number(text);
};

/**
 * What a command may do to the store (R10.3). `create`: create a missing SQLite file and migrate
 * (apply, prepare, migrate). `write`: migrate an existing store (resolve, purge-note). `read`:
 * open read-only, never create, migrate or change anything (show, history, in-doubt, verify).
 */
export type BackendAccess = 'create' | 'write' | 'read';

export const targetOf = (options: BackendOptions): { db: string | undefined; postgres: string | undefined } => {
  const db = options.db ?? (options.postgres === undefined ? process.env.QINGLONG_BARRIER_DB : undefined);
  const postgres = options.postgres ?? (options.db === undefined ? process.env.QINGLONG_BARRIER_POSTGRES : undefined);
  if (db !== undefined && postgres !== undefined) throw usage('give either --db PATH or --postgres URL, not both');
  // a folder is refused here, as bad input, before SQLite or a migration tries to open it (EISDIR)
  if (db !== undefined && statSync(db, { throwIfNoEntry: false })?.isDirectory() === true) {
    throw usage(`--db must name a SQLite database file, but ${db} is a directory`);
  }
  return { db, postgres };
};

/**
 * One bounded PostgreSQL connection for the CLI's schema commands (R13.1): a connect that gets
 * no answer, a statement whose answer never comes (a frozen server), and the migration's
 * deadline for every lock it waits for end in a typed error, never a hang.
 */
const withMigrationClient = async <T>(postgres: string, options: BackendOptions, body: (client: PoolClient, deadlineMs: number) => Promise<T>): Promise<T> => {
  const { DEFAULT_TIMEOUTS } = backendModules.pgAuthority();
  const { connectTyped, createOwnedPool, secretsOf } = backendModules.pgPool();
  const { mapPgError, unavailableReasonOf } = backendModules.pgErrors();
  const lockMs = lockTimeoutOf(options.lockTimeout);
  const timeouts = { ...DEFAULT_TIMEOUTS, ...(lockMs === undefined ? {} : { lockMs }) };
  const pool = createOwnedPool({ connectionString: postgres, poolConfig: { max: 1 }, onError: () => undefined, session: timeouts });
  try {
    const client = await connectTyped(pool, secretsOf({ connectionString: postgres }));
    let broken = false;
    try {
      return await body(client, timeouts.deadlineMs);
    } catch (e) {
      broken = unavailableReasonOf(e) !== undefined; // never handed back to a pool that ends anyway, but not reused either
      throw mapPgError(e);
    } finally {
      client.release(broken);
    }
  } finally {
    await pool.end();
  }
};

/** `migrate`: applies what is pending (creating a missing SQLite file) and names it. */
export const migrateBackend = async (options: BackendOptions): Promise<string[]> => {
  const { db, postgres } = targetOf(options);
  if (postgres !== undefined) return withMigrationClient(postgres, options, async (client, deadlineMs) => [...(await backendModules.pgMigrate().migratePostgres(client, undefined, { deadlineMs })).applied]);
  if (db === undefined) throw usage('which database? give --db PATH (SQLite) or --postgres URL');
  return backendModules.sqliteFile().migrateSqliteFile(db);
};

/**
 * `migrate --print-sql`: the SQL `migrate` would run on this PostgreSQL database, for a DBA to
 * review and run; nothing is applied. A SQLite file has no DBA: `migrate` migrates it.
 */
export const migrationSqlOf = async (options: BackendOptions): Promise<string> => {
  const { postgres } = targetOf(options);
  if (postgres === undefined) throw usage('--print-sql prints the SQL for PostgreSQL: give --postgres URL (a SQLite file is migrated by migrate itself)');
  return withMigrationClient(postgres, options, async (client) => (await backendModules.pgMigrate().pendingMigrationSql(client)).sql);
};

/** Opens the chosen authority with no more rights than `access` needs. */
export const openBackend = async (options: BackendOptions, access: BackendAccess): Promise<RecoverableStartBarrierAuthority> => {
  const { db, postgres } = targetOf(options);
  const lockMs = lockTimeoutOf(options.lockTimeout);
  const keys = keyringFromEnvironment();
  const plans = planKeyringFrom(options.planKeyring);
  const keyed = { ...(keys === undefined ? {} : { evidenceKeys: keys }), ...(plans === undefined ? {} : { plans }) };
  if (postgres !== undefined) {
    return backendModules.pgAuthority().openPostgresStartBarrier({
      connectionString: postgres,
      migrate: access !== 'read' && (options.migrate ?? true),
      ...(lockMs === undefined ? {} : { timeouts: { lockMs } }),
      ...keyed,
    });
  }
  if (db === undefined) throw usage('which database? give --db PATH (SQLite) or --postgres URL');
  if (access !== 'create' && !existsSync(db)) throw new NoDatabaseError(db);
  return backendModules.sqlite().openSqliteStartBarrier({ path: db, ...(access === 'read' ? { readOnly: true } : {}), ...(lockMs === undefined ? {} : { busyTimeoutMs: lockMs }), ...keyed });
};
