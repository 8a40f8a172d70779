import type { Pool, PoolClient, PoolConfig } from 'pg';
import { ConnectionError, DriverMissingError, isModuleMissing } from '../../application/openErrors';

// node-postgres conventions for the authority's own pool: the caller's PoolConfig passes
// through (ssl, max, idle timeouts ...), pool errors reach the caller's `onError` hook, and
// a failure to connect is a typed ConnectionError. `pg` is an optional peer dependency, so it
// is loaded only when a PostgreSQL authority is opened.

/** Called with every error the authority's own pool emits (an idle connection the server closed). */
export type PoolErrorHandler = (error: Error) => void;

export const loadPg = (): typeof import('pg') => {
  try {
    return require('pg') as typeof import('pg');
  } catch (e) {
    if (isModuleMissing(e, 'pg')) throw new DriverMissingError('pg', '/postgres', { cause: e });
    throw e;
  }
};

/** A connection string without its password, for error messages. */
const redacted = (url: string): string => url.replace(/\/\/([^:/@]*):[^@]*@/, '//$1:***@');

/** A `postgres://` / `postgresql://` URL or a socket directory; anything else is refused before pg guesses a host. */
export const assertConnectionString = (connectionString: string): void => {
  if (connectionString.startsWith('/')) return;
  let url: URL | undefined;
  try {
    url = new URL(connectionString);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:')) {
    throw new ConnectionError('invalid_url', `not a PostgreSQL connection string: "${redacted(connectionString)}" (expected postgres://USER@HOST:PORT/DATABASE)`);
  }
};

export interface OwnedPoolOptions {
  readonly connectionString?: string | undefined;
  readonly poolConfig?: PoolConfig | undefined;
  readonly onError?: PoolErrorHandler | undefined;
  /**
   * Session-level bounds for reads outside a transaction (the authority's timeouts), and the
   * client-side bounds of R9.5: a connect that gets no answer, a statement whose answer never
   * comes (a frozen or partitioned server).
   */
  readonly session: {
    readonly statementMs: number;
    readonly lockMs: number;
    readonly idleInTransactionMs: number;
    readonly connectMs: number;
    readonly queryMs: number;
  };
}

/** The authority's own pool: the caller's config, then the connection string and the authority's session timeouts. */
export const createOwnedPool = (options: OwnedPoolOptions): Pool => {
  const connectionString = options.connectionString ?? options.poolConfig?.connectionString;
  if (connectionString !== undefined) assertConnectionString(connectionString);
  const { Pool: PgPool } = loadPg();
  const pool = new PgPool({
    ...options.poolConfig,
    ...(connectionString === undefined ? {} : { connectionString }),
    statement_timeout: options.session.statementMs,
    lock_timeout: options.session.lockMs,
    idle_in_transaction_session_timeout: options.session.idleInTransactionMs,
    connectionTimeoutMillis: options.session.connectMs,
    query_timeout: options.session.queryMs,
    keepAlive: true,
  });
  // Without a listener an idle connection's 'error' (server restart, failover,
  // pg_terminate_backend) would crash the process; it is never silently dropped either.
  const onError = options.onError ?? ((error: Error) => process.emitWarning(`start-barrier PostgreSQL pool: ${error.message}`, 'StartBarrierPoolWarning'));
  pool.on('error', (error) => onError(error));
  return pool;
};

const CONNECT_FAILURES: Readonly<Record<string, { reason: ConnectionError['reason']; hint: string }>> = {
  ECONNREFUSED: { reason: 'refused', hint: 'is the server running and listening there?' },
  ENOTFOUND: { reason: 'host_not_found', hint: 'the host name does not resolve' },
  EAI_AGAIN: { reason: 'host_not_found', hint: 'the host name does not resolve (temporary DNS failure)' },
  ETIMEDOUT: { reason: 'timeout', hint: 'the server did not answer in time' },
  EHOSTUNREACH: { reason: 'unavailable', hint: 'the host is unreachable' },
  '28P01': { reason: 'authentication', hint: 'password authentication failed' },
  '28000': { reason: 'authentication', hint: 'the role may not log in (is it a LOGIN role? see the README: PostgreSQL setup)' },
  '3D000': { reason: 'database_missing', hint: 'the database does not exist' },
  '57P03': { reason: 'unavailable', hint: 'the server is starting up or shutting down' },
};

/** Connect once for the opening checks; driver failures become a ConnectionError naming the cause. */
export const connectTyped = async (pool: Pool): Promise<PoolClient> => {
  try {
    return await pool.connect();
  } catch (e) {
    const code = typeof e === 'object' && e !== null ? (e as { code?: unknown }).code : undefined;
    const known = typeof code === 'string' ? CONNECT_FAILURES[code] : undefined;
    const message = e instanceof Error ? e.message : String(e);
    if (known !== undefined) throw new ConnectionError(known.reason, `cannot connect to PostgreSQL: ${known.hint} (${message})`, { cause: e });
    if (/timeout/i.test(message)) throw new ConnectionError('timeout', `cannot connect to PostgreSQL: ${message}`, { cause: e });
    throw e;
  }
};
