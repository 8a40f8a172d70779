import { inspect, type InspectOptionsStylized } from 'node:util';
import type { Pool, PoolClient, PoolConfig } from 'pg';
import { ConnectionError, DriverMissingError, isModuleMissing } from '../../application/openErrors';
import { passwordsOf, redactSecrets } from '../../domain/redact';

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

/** The one route to a cluster this library supports, named wherever several hosts are refused. */
const ONE_ENDPOINT =
  'give one endpoint that always reaches the current primary: HAProxy in front of the cluster (Patroni: option httpchk GET /primary) or a virtual IP; node-postgres does not fail over between hosts';

/** `host=a,b` (libpq key=value) or `postgres://a:5432,b:5432/db` (libpq multi-host URI). */
const namesSeveralHosts = (connectionString: string): boolean => {
  const authority = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/i.exec(connectionString)?.[1];
  if (authority !== undefined) return authority.slice(authority.lastIndexOf('@') + 1).includes(',');
  return /(?:^|\s)(?:host|hostaddr|port)\s*=\s*'?[^\s',]*,/i.test(connectionString);
};

/**
 * A `postgres://` / `postgresql://` URL with one host, or a socket directory; anything else is
 * refused before pg guesses a host (it reads a libpq key=value string as a database name on
 * host "base"). The message never quotes a password.
 */
export const assertConnectionString = (connectionString: string): void => {
  if (namesSeveralHosts(connectionString)) {
    throw new ConnectionError('multi_host', `several hosts in one connection string ("${redactSecrets(connectionString, passwordsOf(connectionString))}") are not supported: ${ONE_ENDPOINT}`);
  }
  if (connectionString.startsWith('/')) return;
  let url: URL | undefined;
  try {
    url = new URL(connectionString);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:')) {
    throw new ConnectionError(
      'invalid_url',
      `not a PostgreSQL connection string: "${redactSecrets(connectionString, passwordsOf(connectionString))}" (expected postgres://USER@HOST:PORT/DATABASE)`,
    );
  }
};

/** A pool config's `host` naming several hosts is refused as a multi-host URI is. */
const assertOneHost = (config: PoolConfig | undefined): void => {
  if (typeof config?.host === 'string' && config.host.includes(',')) {
    throw new ConnectionError('multi_host', `several hosts in poolConfig.host ("${config.host}") are not supported: ${ONE_ENDPOINT}`);
  }
};

/**
 * What `util.inspect` shows of the authority's own pool: its counts and the options without
 * any password (pg hides `password` itself, not the one inside `connectionString`).
 */
const inspectPool = (pool: Pool, secrets: readonly string[]): void => {
  Object.defineProperty(pool, inspect.custom, {
    enumerable: false,
    value: (_depth: number, opts: InspectOptionsStylized, insp: typeof inspect) => {
      const { connectionString, password: _password, ssl, ...rest } = pool.options as PoolConfig & Record<string, unknown>;
      const shown = {
        ...rest,
        ...(connectionString === undefined ? {} : { connectionString: redactSecrets(connectionString, secrets) }),
        ...(ssl === undefined ? {} : { ssl: typeof ssl === 'object' && ssl !== null ? '[ssl options]' : ssl }),
      };
      return `Pool ${insp({ totalCount: pool.totalCount, idleCount: pool.idleCount, waitingCount: pool.waitingCount, ended: pool.ended, options: shown }, opts)}`;
    },
  });
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

/** The passwords the caller's options carry: what no message or inspection may show. */
export const secretsOf = (options: { readonly connectionString?: string | undefined; readonly poolConfig?: PoolConfig | undefined }): string[] => [
  ...passwordsOf(options.connectionString ?? options.poolConfig?.connectionString, options.poolConfig?.password),
];

/** The authority's own pool: the caller's config, then the connection string and the authority's session timeouts. */
export const createOwnedPool = (options: OwnedPoolOptions): Pool => {
  const connectionString = options.connectionString ?? options.poolConfig?.connectionString;
  if (connectionString !== undefined) assertConnectionString(connectionString);
  assertOneHost(options.poolConfig);
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
  // A connection checked out (an open's checks, a claim, a recovery snapshot, a read) whose
  // server dies between two statements emits 'error' too, where the pool's idle listener is not
  // attached: the statement that follows fails typed, and the pool drops the connection on
  // release (it is no longer queryable). This listener keeps the event from ending the process.
  pool.on('connect', (client) => client.on('error', () => undefined));
  inspectPool(pool, secretsOf(options));
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

/**
 * SSL settings the driver or the server refused: a server without SSL, a certificate file that
 * cannot be read, an sslmode pg will not take, a certificate that fails verification.
 */
const isSslFailure = (e: unknown, message: string): boolean => {
  const code = typeof e === 'object' && e !== null ? (e as { code?: unknown }).code : undefined;
  if (/SSL|sslmode|sslrootcert|sslcert|sslkey|certificate/i.test(message)) return true;
  if (typeof code !== 'string') return false;
  return /^(ERR_SSL_|ERR_TLS_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_|CERT_)/.test(code) || (code === 'ENOENT' && (e as { syscall?: unknown }).syscall === 'open');
};

/** Connect once for the opening checks; driver failures become a ConnectionError naming the cause, with no password in it. */
export const connectTyped = async (pool: Pool, secrets: readonly string[] = []): Promise<PoolClient> => {
  try {
    return await pool.connect();
  } catch (e) {
    const code = typeof e === 'object' && e !== null ? (e as { code?: unknown }).code : undefined;
    const known = typeof code === 'string' ? CONNECT_FAILURES[code] : undefined;
    const message = redactSecrets(e instanceof Error ? e.message : String(e), secrets);
    if (known !== undefined) throw new ConnectionError(known.reason, `cannot connect to PostgreSQL: ${known.hint} (${message})`, { cause: e });
    if (isSslFailure(e, message)) throw new ConnectionError('ssl', `cannot connect to PostgreSQL: the SSL settings were refused (${message})`);
    if (/timeout/i.test(message)) throw new ConnectionError('timeout', `cannot connect to PostgreSQL: ${message}`, { cause: e });
    throw e;
  }
};
