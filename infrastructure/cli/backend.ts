import { existsSync } from 'node:fs';
import { ValidationError } from '../../domain';
import { Client } from 'pg';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { migratePostgres, pendingMigrationSql } from '../postgres/migrate';
import { openPostgresStartBarrier } from '../postgres/postgresAuthority';
import { openSqliteStartBarrier } from '../sqlite';
import { migrateSqliteFile } from '../sqlite/fileIdentity';
import { keyringFromEnvironment } from './keyring';

// `--db PATH` (SQLite, the default backend) or `--postgres URL`; environment fallbacks for
// scripts: QINGLONG_BARRIER_DB, QINGLONG_BARRIER_POSTGRES; the deployment keyring from the
// key file QINGLONG_BARRIER_KEYRING_FILE names (keyring.ts).

export interface BackendOptions {
  readonly db?: string;
  readonly postgres?: string;
  readonly lockTimeout?: string;
  readonly migrate?: boolean;
}

export class NoDatabaseError extends Error {
  constructor(path: string) {
    super(`no database at ${path} (only apply, prepare and migrate create one)`);
    this.name = 'NoDatabaseError';
  }
}

const usage = (message: string) => new ValidationError('command line', [{ path: '(options)', reason: 'invalid_value', message }]);

const lockTimeoutOf = (text: string | undefined): number | undefined => {
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

const targetOf = (options: BackendOptions): { db: string | undefined; postgres: string | undefined } => {
  const db = options.db ?? (options.postgres === undefined ? process.env.QINGLONG_BARRIER_DB : undefined);
  const postgres = options.postgres ?? (options.db === undefined ? process.env.QINGLONG_BARRIER_POSTGRES : undefined);
  if (db !== undefined && postgres !== undefined) throw usage('give either --db PATH or --postgres URL, not both');
  return { db, postgres };
};

/** `migrate`: applies what is pending (creating a missing SQLite file) and names it. */
export const migrateBackend = async (options: BackendOptions): Promise<string[]> => {
  const { db, postgres } = targetOf(options);
  if (postgres !== undefined) {
    const client = new Client({ connectionString: postgres });
    await client.connect();
    try {
      return [...(await migratePostgres(client)).applied];
    } finally {
      await client.end();
    }
  }
  if (db === undefined) throw usage('which database? give --db PATH (SQLite) or --postgres URL');
  return migrateSqliteFile(db);
};

/**
 * `migrate --print-sql`: the SQL `migrate` would run on this PostgreSQL database, for a DBA to
 * review and run; nothing is applied. A SQLite file has no DBA: `migrate` migrates it.
 */
export const migrationSqlOf = async (options: BackendOptions): Promise<string> => {
  const { postgres } = targetOf(options);
  if (postgres === undefined) throw usage('--print-sql prints the SQL for PostgreSQL: give --postgres URL (a SQLite file is migrated by migrate itself)');
  const client = new Client({ connectionString: postgres });
  await client.connect();
  try {
    return (await pendingMigrationSql(client)).sql;
  } finally {
    await client.end();
  }
};

/** Opens the chosen authority with no more rights than `access` needs. */
export const openBackend = async (options: BackendOptions, access: BackendAccess): Promise<RecoverableStartBarrierAuthority> => {
  const { db, postgres } = targetOf(options);
  const lockMs = lockTimeoutOf(options.lockTimeout);
  const keys = keyringFromEnvironment();
  const keyed = keys === undefined ? {} : { evidenceKeys: keys };
  if (postgres !== undefined) {
    return openPostgresStartBarrier({
      connectionString: postgres,
      migrate: access !== 'read' && (options.migrate ?? true),
      ...(lockMs === undefined ? {} : { timeouts: { lockMs } }),
      ...keyed,
    });
  }
  if (db === undefined) throw usage('which database? give --db PATH (SQLite) or --postgres URL');
  if (access !== 'create' && !existsSync(db)) throw new NoDatabaseError(db);
  return openSqliteStartBarrier({ path: db, ...(access === 'read' ? { readOnly: true } : {}), ...(lockMs === undefined ? {} : { busyTimeoutMs: lockMs }), ...keyed });
};
