import { redactSecrets } from '../domain/redact';

// Typed errors from opening an authority. They say what to fix (install a driver, correct a
// URL, start the server) instead of leaking a driver's raw error (`getaddrinfo ENOTFOUND base`).

/** An optional peer dependency the chosen backend (or the MCP adapter) needs is not installed. */
export class DriverMissingError extends Error {
  readonly code = 'DRIVER_MISSING' as const;
  constructor(
    readonly driver: 'pg' | 'better-sqlite3' | '@modelcontextprotocol/sdk',
    readonly subpath: '/postgres' | '/sqlite' | '/adapters',
    options?: { cause?: unknown },
  ) {
    super(`@qinglong/start-barrier${subpath} needs the "${driver}" package: npm install ${driver}`, options);
    this.name = 'DriverMissingError';
  }
}

export type ConnectionFailure =
  | 'invalid_url'
  /** Several hosts in one connection string: the supported route is one endpoint (HAProxy, a virtual IP). */
  | 'multi_host'
  /** An SSL setting the driver or the server refused (mode, certificate files, verification). */
  | 'ssl'
  | 'refused'
  | 'host_not_found'
  | 'timeout'
  | 'authentication'
  | 'database_missing'
  | 'unavailable';

/** The database could not be reached or opened; nothing was written. The message never holds a password. */
export class ConnectionError extends Error {
  readonly code = 'CONNECTION_FAILED' as const;
  constructor(
    readonly reason: ConnectionFailure,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(redactSecrets(message), options);
    this.name = 'ConnectionError';
  }
}

export const isModuleMissing = (e: unknown, name: string): boolean =>
  typeof e === 'object' &&
  e !== null &&
  (e as { code?: unknown }).code === 'MODULE_NOT_FOUND' &&
  String((e as { message?: unknown }).message).includes(`'${name}'`);

/**
 * An opener's options come from a config file or an environment as often as from code: an
 * unknown key is a typo whose setting would silently not apply (`synchronus: 'NORMAL'`, a
 * misspelt `connectionString` that lets pg fall back to its environment). Refused before
 * anything is opened, as the openers' other option errors are (RangeError).
 */
export const requireKnownOptions = (what: string, options: unknown, known: readonly string[]): void => {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) throw new RangeError(`${what} must be an object, got ${options === null ? 'null' : Array.isArray(options) ? 'an array' : typeof options}`);
  const unknown = Object.keys(options).filter((k) => !known.includes(k));
  if (unknown.length > 0) throw new RangeError(`${what}: unknown option ${unknown.map((k) => JSON.stringify(k)).join(', ')} (known: ${known.join(', ')})`);
};

/** An option that chooses a behaviour takes only a value that names one (`migrate: 'false'` as text names none). */
export const requireOneOf = (name: string, value: unknown, allowed: readonly unknown[]): void => {
  if (value !== undefined && !allowed.includes(value)) throw new RangeError(`${name} must be ${allowed.map((v) => JSON.stringify(v)).join(' or ')}, got ${JSON.stringify(value)}`);
};

/** An option that is code (a hook, a clock, an error handler) is a function, or fails at its first use. */
export const requireFunction = (name: string, value: unknown): void => {
  if (value !== undefined && typeof value !== 'function') throw new RangeError(`${name} must be a function, got ${typeof value}`);
};

/**
 * An opener's hooks (fault injection, attempt counts): each a function, none unknown. A
 * misspelt hook would silently never run, and a spec built on it would pass without testing
 * anything.
 */
export const requireFunctions = (what: string, value: unknown, known: readonly string[]): void => {
  if (value === undefined) return;
  requireKnownOptions(what, value, known);
  for (const [name, f] of Object.entries(value as Record<string, unknown>)) requireFunction(`${what}.${name}`, f);
};
