import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { isSqliteError, loadBetterSqlite3 } from './connection';
import { CorruptRecordError, ValidationError } from '../../domain';
import { loadMigrations, MigrationError, planMigrations, requireLedgerAsWritten, type AppliedMigration, type LedgerRow } from '../migrations';
import { LEDGER_DIGEST_TAG, eventChainDigest, fieldsDigest } from '../../domain/eventChain';
import * as SQL from './sql';

// R10.3: a barrier SQLite file says what it is in its header (`PRAGMA application_id` and
// `user_version`, the number of the last migration applied, both set by the migration runner
// in the transaction of the migrations, so an older store gets them with its next upgrade), so a reader
// can tell it from any other SQLite file by reading 100 bytes, before SQLite opens it at all.
// Read commands open it read-only and never create, migrate or change it; any other file is
// refused untouched.

/** 'QBAR': the application id every migrated barrier file carries in its header. */
export const BARRIER_APPLICATION_ID = 0x51424152;
const SQLITE_MAGIC = 'SQLite format 3\u0000';

export interface FileHeader {
  readonly sqlite: boolean;
  readonly applicationId: number;
  readonly userVersion: number;
}

const notABarrier = (path: string, why: string): ValidationError =>
  new ValidationError('database file', [{ path: 'path', reason: 'invalid_value', message: `${path} is not a start barrier database (${why}); it was left unchanged` }]);

/** The first 100 bytes, read with plain file I/O: nothing SQLite could write (WAL, -shm, a journal). */
export const readFileHeader = (path: string): FileHeader => {
  const fd = openSync(path, 'r');
  try {
    const header = Buffer.alloc(100);
    const n = readSync(fd, header, 0, 100, 0);
    if (n < 100 || header.toString('latin1', 0, 16) !== SQLITE_MAGIC) return { sqlite: false, applicationId: 0, userVersion: 0 };
    return { sqlite: true, userVersion: header.readInt32BE(60), applicationId: header.readInt32BE(68) };
  } finally {
    closeSync(fd);
  }
};

/** The user_version a migration leaves: the number in its name (`0059-…` -> 59). */
export const versionOfMigration = (name: string): number => Number(/^(\d+)-/.exec(name)?.[1] ?? '0');

const appliedOf = (db: Database.Database): AppliedMigration[] => {
  const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get();
  return table === undefined ? [] : (db.prepare(SQL.SELECT_APPLIED).all() as AppliedMigration[]);
};

/**
 * Opens a barrier file for reading only. Refuses (VALIDATION_FAILED naming `path`, the file
 * byte-identical) an empty file, a file that is not SQLite, another application's SQLite file,
 * and a barrier file whose schema is behind or ahead of this code (run `migrate`).
 */
export const openReadOnlyBarrierFile = (path: string): Database.Database => {
  const header = readFileHeader(path);
  if (!header.sqlite) throw notABarrier(path, 'not an SQLite database');
  // a zero id may only mean the header's page is still in the -wal of a barrier store
  const inWal = header.applicationId === 0 && existsSync(`${path}-wal`);
  if (header.applicationId !== BARRIER_APPLICATION_ID && !inWal) {
    throw notABarrier(path, header.applicationId === 0 ? 'no barrier application id; a store made before it had one needs `migrate` once' : `application id ${header.applicationId}`);
  }
  const db = new (loadBetterSqlite3())(path, { readonly: true, fileMustExist: true });
  try {
    const applicationId = db.pragma('application_id', { simple: true }) as number;
    if (applicationId !== BARRIER_APPLICATION_ID) throw notABarrier(path, applicationId === 0 ? 'no barrier application id; a store made before it had one needs `migrate` once' : `application id ${applicationId}`);
    db.pragma('query_only = ON');
    db.pragma('trusted_schema = OFF');
    const applied = appliedOf(db);
    requireLedgerReachesHeader(db, applied);
    const pending = planMigrations(loadMigrations('sqlite'), applied);
    if (pending.length > 0) throw new MigrationError(`the database schema is behind this code: ${pending.map((m) => m.name).join(', ')} not applied; run \`migrate\` first`);
    requireSchemaAsMigrated(db);
    return db;
  } catch (e) {
    db.close();
    throw e;
  }
};

/**
 * Before a write path migrates: refuse another application's file instead of adding our tables
 * to it. An empty file, a fresh database and an older barrier store (our migrations table,
 * no application id yet) pass.
 */
export const assertBarrierOrEmpty = (db: Database.Database, path: string): void => {
  if (existsSync(path) && statSync(path).size > 0 && !readFileHeader(path).sqlite) throw notABarrier(path, 'not an SQLite database');
  const applicationId = db.pragma('application_id', { simple: true }) as number;
  if (applicationId === BARRIER_APPLICATION_ID) return;
  if (applicationId !== 0) throw notABarrier(path, `application id ${applicationId}`);
  const objects = db.prepare("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").all() as { name: string }[];
  if (objects.length > 0 && !objects.some((o) => o.name === 'schema_migrations')) throw notABarrier(path, 'it holds tables of another application');
};

/**
 * The chain back-fill of a released store computes links in SQL; SQLite has no sha256 of its own. The
 * function exists on the migrator's connection only: no trigger can call it (directOnly).
 */
export const registerMigrationFunctions = (db: Database.Database): void => {
  db.function('ql3_event_chain', { deterministic: true, directOnly: true }, (previous, stream_id, stream_position, event_id, event_type, data_json, committed_at_ms) =>
    eventChainDigest(String(previous), {
      stream_id: String(stream_id),
      stream_position: String(stream_position),
      event_id: String(event_id),
      event_type: String(event_type),
      data_json: String(data_json),
      committed_at_ms: String(committed_at_ms),
    }),
  );
  // The ledger's row digests are written the same way, after each plan.
  db.function('ql3_fields_digest', { deterministic: true, directOnly: true, varargs: true }, (tag, ...fields) =>
    fieldsDigest(String(tag), fields.map((f) => String(f))),
  );
};

/**
 * R9.3: the header's user_version names the last migration applied, written in the same
 * transaction as its ledger row. A ledger that ends before it lost rows: applying them again
 * would fail halfway on objects that exist, or worse, succeed on a file that is not what its
 * ledger says.
 */
export const requireLedgerReachesHeader = (db: Database.Database, applied: readonly AppliedMigration[]): void => {
  const header = db.pragma('user_version', { simple: true }) as number;
  const last = applied[applied.length - 1];
  if (header > (last === undefined ? 0 : versionOfMigration(last.name))) {
    throw new MigrationError(
      `the file header says migration ${header} was applied, but the ledger (schema_migrations) ends at ${last?.name ?? 'no migration'}: ledger rows are missing; nothing was applied`,
      true,
    );
  }
};

interface SchemaObject {
  readonly type: string;
  readonly name: string;
  readonly tbl_name: string;
  readonly sql: string | null;
}

const objectsOf = (db: Database.Database): Map<string, SchemaObject> =>
  new Map((db.prepare(SQL.SCHEMA_OBJECTS).all() as SchemaObject[]).map((o) => [`${o.type} ${o.name}`, o]));

let made: Map<string, SchemaObject> | undefined;

/** What the migrations make, read once per process from a fresh in-memory store (about 20 ms). */
const objectsTheMigrationsMake = (): Map<string, SchemaObject> => {
  if (made === undefined) {
    const db = new (loadBetterSqlite3())(':memory:');
    try {
      migrateSqlite(db, false);
      made = objectsOf(db);
    } finally {
      db.close();
    }
  }
  return made;
};

/**
 * R9.1: the triggers are the file's own refusal of a forged history, and the ledger cannot show
 * that they are still there. Every table, index and trigger the migrations make must be in the
 * file with the definition they gave it, and no other trigger (one could skip a write with
 * RAISE(IGNORE)). Other tables, indexes and views an operator adds are not damage.
 */
export const schemaObjectProblems = (db: Database.Database): string[] => {
  const [found, made] = [objectsOf(db), objectsTheMigrationsMake()];
  const problems: string[] = [];
  for (const [key, o] of made) {
    const f = found.get(key);
    if (f === undefined) problems.push(`${key} is missing`);
    else if (f.tbl_name !== o.tbl_name || f.sql !== o.sql) problems.push(`${key} is not defined as the migrations made it`);
  }
  for (const [key, f] of found) if (f.type === 'trigger' && !made.has(key)) problems.push(`${key} (on ${f.tbl_name}) is not one the migrations made`);
  return problems;
};

/** Opening refuses a file whose schema objects are not the migrations' (CORRUPT_RECORD, nothing written). */
export const requireSchemaObjects = (db: Database.Database): void => {
  const problems = schemaObjectProblems(db);
  if (problems.length > 0) {
    throw new CorruptRecordError('schema', 'database', `the schema objects are not the ones the migrations make (${problems.join('; ')}): restore the file from a copy`);
  }
};

/** The ledger and the capability rows: what an open and verify check against the migrations. */
export const readLedger = (db: Database.Database): { ledger: LedgerRow[]; capabilities: { name: unknown; version: unknown }[] } => ({
  ledger: db.prepare(SQL.SELECT_LEDGER).all() as LedgerRow[],
  capabilities: db.prepare(SQL.SELECT_CAPABILITIES).all() as { name: unknown; version: unknown }[],
});

/** An open's check: the objects, and the ledger and capability rows as the migrations wrote them. */
const requireSchemaAsMigrated = (db: Database.Database): void => {
  requireSchemaObjects(db);
  const { ledger, capabilities } = readLedger(db);
  requireLedgerAsWritten('sqlite', ledger, capabilities);
};

/**
 * For a connection's transactions: the schema objects are what the migrations make. SQLite
 * changes the schema cookie with every change to the schema, by any connection, so the objects
 * are compared again only when it moved (otherwise one header read); called inside the
 * transaction, before its first write, a write never commits on triggers dropped while the
 * connection was open.
 */
export const schemaGuard = (db: Database.Database): (() => void) => {
  const cookie = db.prepare('PRAGMA schema_version').pluck();
  let checked: unknown;
  return () => {
    const now = cookie.get();
    if (now === checked) return;
    requireSchemaObjects(db);
    checked = now;
  };
};

/**
 * Applies what is pending in one `BEGIN IMMEDIATE`; the header's user_version follows the last
 * one. The schema objects are compared inside it, so a damaged file is refused with nothing applied.
 */
export const migrateSqlite = (db: Database.Database, checkObjects = true): string[] => {
  registerMigrationFunctions(db);
  db.exec(SQL.MIGRATIONS_TABLE);
  const known = loadMigrations('sqlite');
  db.exec('BEGIN IMMEDIATE');
  try {
    const applied = appliedOf(db);
    const pending = planMigrations(known, applied);
    requireLedgerReachesHeader(db, applied);
    for (const m of pending) {
      try {
        db.exec(m.sql);
      } catch (e) {
        // a file the schema refuses (an object it makes exists already, stored rows it cannot
        // carry forward): typed, as on PostgreSQL
        if (isSqliteError(e) && (e.code === 'SQLITE_ERROR' || e.code.startsWith('SQLITE_CONSTRAINT'))) throw new MigrationError(`migration ${m.name} failed: ${e.message}; nothing was applied`);
        throw e;
      }
      db.prepare(SQL.INSERT_APPLIED).run(m.name, m.checksum, Date.now());
    }
    if (pending.length > 0 && db.prepare(SQL.LEDGER_DIGEST_PRESENT).get() !== undefined) db.prepare(SQL.FILL_LEDGER_DIGESTS).run(LEDGER_DIGEST_TAG);
    const last = known[known.length - 1];
    if (db.pragma('application_id', { simple: true }) !== BARRIER_APPLICATION_ID) db.pragma(`application_id = ${BARRIER_APPLICATION_ID}`);
    if (last !== undefined && db.pragma('user_version', { simple: true }) !== versionOfMigration(last.name)) db.pragma(`user_version = ${versionOfMigration(last.name)}`);
    if (checkObjects) requireSchemaAsMigrated(db);
    db.exec('COMMIT');
    // The header lives on page 1: in WAL mode a change stays in the -wal file until a
    // checkpoint, and a reader checks the main file's header first. Best effort: a busy
    // checkpoint leaves it to the next one (openReadOnlyBarrierFile also looks into the WAL).
    if (pending.length > 0 && db.pragma('journal_mode', { simple: true }) === 'wal') db.pragma('wal_checkpoint(TRUNCATE)');
    return pending.map((m) => m.name);
  } catch (e) {
    if (db.inTransaction) db.exec('ROLLBACK');
    throw e;
  }
};

/** The write path's opening: refuse a foreign file, set the connection's pragmas, migrate. Returns what was applied. */
export const openWritable = (db: Database.Database, path: string, synchronous: 'FULL' | 'NORMAL', busyTimeoutMs: number): string[] => {
  assertBarrierOrEmpty(db, path);
  for (const p of SQL.PRAGMAS(synchronous, busyTimeoutMs)) db.pragma(p);
  return migrateSqlite(db);
};

/** `migrate` on a file: creates it if missing; refuses another application's file. */
export const migrateSqliteFile = (path: string): string[] => {
  const db = new (loadBetterSqlite3())(path);
  try {
    return openWritable(db, path, 'FULL', 5000);
  } finally {
    db.close();
  }
};
