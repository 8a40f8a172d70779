import type Database from 'better-sqlite3';
import { ConnectionError, DriverMissingError, isModuleMissing } from '../../application/openErrors';
import type { SqliteDatabase } from './database';

// better-sqlite3 conventions: open a file by path, or take a `Database` the caller already
// opened (and still owns: closing the authority leaves it open). better-sqlite3 is an
// optional peer dependency, so it is loaded only when a SQLite authority is opened.

export const loadBetterSqlite3 = (): typeof Database => {
  try {
    return require('better-sqlite3') as typeof Database;
  } catch (e) {
    if (isModuleMissing(e, 'better-sqlite3')) throw new DriverMissingError('better-sqlite3', '/sqlite', { cause: e });
    throw e;
  }
};

/** better-sqlite3's SqliteError, recognised without loading the driver (it may be absent). */
export const isSqliteError = (e: unknown): e is Error & { readonly code: string } =>
  e instanceof Error && e.name === 'SqliteError' && typeof (e as { code?: unknown }).code === 'string';

const injected = new WeakSet<Database.Database>();

/** True for a `Database` the caller passed in: the authority must not close it. */
export const isCallerOwned = (db: Database.Database): boolean => injected.has(db);

export const openSqliteConnection = (source: { readonly path?: string | undefined; readonly database?: SqliteDatabase | undefined }): Database.Database => {
  if (source.database !== undefined) {
    if (!source.database.open) throw new ConnectionError('unavailable', 'the injected better-sqlite3 Database is closed');
    if (source.database.readonly) throw new ConnectionError('unavailable', `the injected better-sqlite3 Database (${source.database.name}) is read-only; the authority writes`);
    // The public type is our structural subset; what the caller passes is a better-sqlite3 Database.
    const database = source.database as Database.Database;
    injected.add(database);
    return database;
  }
  if (source.path === undefined || source.path === '') throw new ConnectionError('invalid_url', 'give a SQLite file path (path) or a better-sqlite3 Database (database)');
  const BetterSqlite3 = loadBetterSqlite3();
  try {
    return new BetterSqlite3(source.path);
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    throw new ConnectionError('unavailable', `cannot open the SQLite file ${source.path}: ${message}`, { cause: e });
  }
};
