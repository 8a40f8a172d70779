// Typed errors from opening an authority. They say what to fix (install a driver, correct a
// URL, start the server) instead of leaking a driver's raw error (`getaddrinfo ENOTFOUND base`).

/** An optional peer dependency the chosen backend needs is not installed. */
export class DriverMissingError extends Error {
  readonly code = 'DRIVER_MISSING' as const;
  constructor(
    readonly driver: 'pg' | 'better-sqlite3',
    readonly subpath: '/postgres' | '/sqlite',
    options?: { cause?: unknown },
  ) {
    super(`@qinglong/start-barrier${subpath} needs the "${driver}" package: npm install ${driver}`, options);
    this.name = 'DriverMissingError';
  }
}

export type ConnectionFailure = 'invalid_url' | 'refused' | 'host_not_found' | 'timeout' | 'authentication' | 'database_missing' | 'unavailable';

/** The database could not be reached or opened; nothing was written. */
export class ConnectionError extends Error {
  readonly code = 'CONNECTION_FAILED' as const;
  constructor(
    readonly reason: ConnectionFailure,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'ConnectionError';
  }
}

export const isModuleMissing = (e: unknown, name: string): boolean =>
  typeof e === 'object' &&
  e !== null &&
  (e as { code?: unknown }).code === 'MODULE_NOT_FOUND' &&
  String((e as { message?: unknown }).message).includes(`'${name}'`);
