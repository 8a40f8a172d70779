import { existsSync } from 'node:fs';
import { ValidationError } from '../../domain';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { openPostgresStartBarrier as openRecoverablePostgresStartBarrier } from '../postgres/postgresAuthority';
import { openSqliteStartBarrier } from '../sqlite';
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
    super(`no database at ${path} (only apply and prepare create one)`);
    this.name = 'NoDatabaseError';
  }
}

const usage = (message: string) => new ValidationError('command line', [{ path: '(options)', reason: 'invalid_value', message }]);

const lockTimeoutOf = (text: string | undefined): number | undefined => {
  if (text === undefined) return undefined;
  if (!/^[1-9][0-9]{0,6}$/.test(text)) throw usage(`--lock-timeout must be a whole number of milliseconds (1..9999999), got "${text}"`);
  return Number(text);
};

/** Opens the chosen authority. `create`: a missing SQLite file may be created (apply, prepare). */
export const openBackend = async (options: BackendOptions, create: boolean): Promise<RecoverableStartBarrierAuthority> => {
  const db = options.db ?? (options.postgres === undefined ? process.env.QINGLONG_BARRIER_DB : undefined);
  const postgres = options.postgres ?? (options.db === undefined ? process.env.QINGLONG_BARRIER_POSTGRES : undefined);
  if (db !== undefined && postgres !== undefined) throw usage('give either --db PATH or --postgres URL, not both');
  const lockMs = lockTimeoutOf(options.lockTimeout);
  const keys = keyringFromEnvironment();
  const keyed = keys === undefined ? {} : { evidenceKeys: keys };
  if (postgres !== undefined) {
    return openRecoverablePostgresStartBarrier({
      connectionString: postgres,
      migrate: options.migrate ?? true,
      ...(lockMs === undefined ? {} : { timeouts: { lockMs } }),
      ...keyed,
    });
  }
  if (db === undefined) throw usage('which database? give --db PATH (SQLite) or --postgres URL');
  if (!create && !existsSync(db)) throw new NoDatabaseError(db);
  return openSqliteStartBarrier({ path: db, ...(lockMs === undefined ? {} : { busyTimeoutMs: lockMs }), ...keyed });
};
