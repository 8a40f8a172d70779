import { copyFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { postgresRaw, sqliteRaw, type RawSql } from './rawSql';

// The owner's tools for damaging a store on purpose, one cell at a time, past its own guards:
// SQLite drops its triggers for each change on a copy of the file and makes them again (foreign
// keys and CHECKs off on that connection); PostgreSQL disables triggers and foreign keys for the damaging transaction
// (`SET LOCAL session_replication_role = replica`, superuser). Unique indexes stay: a change
// one of them refuses never reaches storage. Shared by the corruption sweep and the specs.

/**
 * Runs `body` on a SQLite connection of the owner's with the triggers `drop` picks dropped, then
 * makes again, from their own text, every trigger that was there before and is gone (the ones
 * dropped, and any `body` dropped itself) whose table is still there: the damage is the rows,
 * or the table, not a schema an open refuses for its triggers.
 */
export const withTriggersDropped = <T>(db: Database.Database, drop: (t: { readonly name: string; readonly tbl_name: string }) => boolean, body: () => T): T => {
  const triggers = db.prepare("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger'").all() as { name: string; tbl_name: string; sql: string }[];
  for (const t of triggers.filter(drop)) db.exec(`DROP TRIGGER "${t.name.replace(/"/g, '""')}"`);
  const out = body();
  const present = new Set((db.prepare('SELECT name FROM sqlite_master').all() as { name: string }[]).map((o) => o.name));
  for (const t of triggers) if (present.has(t.tbl_name) && !present.has(t.name)) db.exec(t.sql);
  return out;
};

/**
 * A different value that keeps the cell's type and, for JSON text, keeps it parseable: a
 * number moves by 1000, JSON text gets one hex digit or letter flipped inside a string, other
 * text its last character changed. pg hands BIGINT back as decimal text: that moves by 1000 too.
 */
export const mutateCell = (value: unknown): unknown => {
  if (typeof value === 'number') return value + 1000;
  const s = String(value);
  if (/^-?\d+$/.test(s) && typeof value === 'string' && s.length < 20) return String(BigInt(s) + 1000n);
  if (s.startsWith('{')) {
    const i = s.search(/[0-9a-f](?=[0-9a-f]*")/);
    if (i >= 0) return s.slice(0, i) + (s[i] === '0' ? '1' : '0') + s.slice(i + 1);
  }
  const last = s[s.length - 1] ?? '';
  return s.slice(0, -1) + (last === '0' ? '1' : '0');
};

/** The same content in other bytes: JSON pretty-printed (only the canonical form may verify). */
export const reformatJson = (value: unknown): unknown => JSON.stringify(JSON.parse(String(value)), null, 1);

/** A row the damage session can find again: SQLite rowid, PostgreSQL ctid (which moves on UPDATE). */
export type RowKey = string;

export interface DamageSession {
  readonly raw: RawSql;
  /** Every table of the store and its columns, from the live schema (so a table added later is in it). */
  schema(): Promise<Record<string, string[]>>;
  /** Rows of `table` with their row key in `_key`. */
  rows(table: string, where: string, params: readonly unknown[]): Promise<Record<string, unknown>[]>;
  /** Set one cell; `refused` when a unique index or a type refuses the value. Returns the row's key after. */
  set(table: string, key: RowKey, column: string, value: unknown): Promise<{ applied: boolean; key: RowKey; reason?: string }>;
  /** Delete one row; `undo` puts the same row back. */
  remove(table: string, key: RowKey): Promise<{ undo: () => Promise<void> }>;
  /** Insert one row as the owner (no trigger or foreign key runs); `undo` deletes it again. */
  insert(table: string, row: Record<string, unknown>): Promise<{ undo: () => Promise<void> }>;
  close(): Promise<void>;
}

/** INSERT of one row as it was read (without its row key), columns quoted, values bound. */
const reinsert = (table: string, row: Record<string, unknown>, overriding = ''): { sql: string; params: unknown[] } => {
  const columns = Object.keys(row).filter((c) => c !== '_key');
  return {
    sql: `INSERT INTO ${table} (${columns.map((c) => `"${c}"`).join(', ')}) ${overriding}VALUES (${columns.map(() => '?').join(', ')})`,
    params: columns.map((c) => row[c]),
  };
};

/**
 * SQLite: a copy of the file, keys and checks off on this connection. Each change runs in its
 * own transaction with every trigger dropped and made again from its own text before COMMIT:
 * between changes the file's schema objects are the migrations' own, as an open requires.
 */
export const sqliteDamageSession = (source: string, copy: string): DamageSession => {
  copyFileSync(source, copy);
  const db = new Database(copy);
  db.pragma('journal_mode = WAL');
  db.close();
  const raw = sqliteRaw(copy);
  void raw.exec('PRAGMA foreign_keys = OFF; PRAGMA ignore_check_constraints = ON');
  const asOwner = async <T>(body: () => Promise<T>): Promise<T> => {
    const triggers = await raw.all<{ name: string; sql: string }>("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' ORDER BY rowid");
    await raw.exec('BEGIN IMMEDIATE');
    try {
      for (const t of triggers) await raw.exec(`DROP TRIGGER "${t.name.replace(/"/g, '""')}"`);
      const out = await body();
      for (const t of triggers) await raw.exec(t.sql);
      await raw.exec('COMMIT');
      return out;
    } catch (e) {
      await raw.exec('ROLLBACK');
      throw e;
    }
  };
  /** The primary key columns of a WITHOUT ROWID table (no rowid to find its rows by), or undefined. */
  const withoutRowidKey = async (table: string): Promise<string[] | undefined> => {
    const [def] = await raw.all<{ sql: string }>("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", [table]);
    if (def === undefined || !/WITHOUT\s+ROWID/i.test(def.sql)) return undefined;
    return (await raw.all<{ name: string }>('SELECT name FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk', [table])).map((c) => c.name);
  };
  return {
    raw,
    schema: async () => {
      const out: Record<string, string[]> = {};
      for (const table of await raw.tables()) out[table] = (await raw.all<{ name: string }>(`SELECT name FROM pragma_table_info(?) ORDER BY cid`, [table])).map((c) => c.name);
      return out;
    },
    rows: async (table, where, params) => {
      const pk = await withoutRowidKey(table);
      if (pk === undefined) return raw.all(`SELECT rowid AS _key, * FROM ${table} WHERE ${where}`, params);
      return raw.all(`SELECT json_array(${pk.map((c) => `"${c}"`).join(', ')}) AS _key, * FROM ${table} WHERE ${where}`, params);
    },
    set: async (table, key, column, value) => {
      const pk = await withoutRowidKey(table);
      try {
        return await asOwner(async () => {
          if (pk !== undefined) {
            // A WITHOUT ROWID table is keyed by its primary key: the row is found by it, and a changed key column moves the key along.
            const values = JSON.parse(key) as unknown[];
            const changed = await raw.run(`UPDATE ${table} SET "${column}" = ? WHERE ${pk.map((c) => `"${c}" = ?`).join(' AND ')}`, [value, ...values]);
            if (changed !== 1) return { applied: false, key, reason: `no row ${key} in ${table}` };
            return { applied: true, key: JSON.stringify(pk.map((c, i) => (c === column ? value : values[i]))) };
          }
          const changed = await raw.run(`UPDATE ${table} SET "${column}" = ? WHERE rowid = ?`, [value, key]);
          if (changed !== 1) return { applied: false, key, reason: `no row ${key} in ${table}` };
          // An INTEGER PRIMARY KEY is the rowid itself: changing it moves the row's key along.
          const [alias] = await raw.all<{ n: number }>("SELECT count(*) AS n FROM pragma_table_info(?) WHERE name = ? AND pk = 1 AND upper(type) = 'INTEGER'", [table, column]);
          return { applied: true, key: alias !== undefined && alias.n === 1 ? String(value) : key };
        });
      } catch (e) {
        return { applied: false, key, reason: (e as Error).message };
      }
    },
    remove: async (table, key) => {
      const pk = await withoutRowidKey(table);
      const where = pk === undefined ? 'rowid = ?' : pk.map((c) => `"${c}" = ?`).join(' AND ');
      const params = pk === undefined ? [key] : (JSON.parse(key) as unknown[]);
      const [row] = await raw.all<Record<string, unknown>>(`SELECT * FROM ${table} WHERE ${where}`, params);
      if (row === undefined) throw new Error(`${table}: no row ${key}`);
      await asOwner(() => raw.run(`DELETE FROM ${table} WHERE ${where}`, params));
      const back = reinsert(table, row);
      return { undo: () => asOwner(() => raw.run(back.sql, back.params)).then(() => undefined) };
    },
    insert: async (table, row) => {
      const put = reinsert(table, row);
      const [{ key }] = (await asOwner(() => raw.all<{ key: number }>(`${put.sql} RETURNING rowid AS key`, put.params))) as [{ key: number }];
      return { undo: () => asOwner(() => raw.run(`DELETE FROM ${table} WHERE rowid = ?`, [key])).then(() => undefined) };
    },
    close: () => raw.close(),
  };
};

/** PostgreSQL: superuser, each change its own transaction with triggers and foreign keys off. */
export const postgresDamageSession = async (url: string): Promise<DamageSession> => {
  const raw = await postgresRaw(url);
  const asReplica = async <T>(body: () => Promise<T>): Promise<T> => {
    await raw.exec('BEGIN');
    try {
      await raw.exec('SET LOCAL session_replication_role = replica');
      const out = await body();
      await raw.exec('COMMIT');
      return out;
    } catch (e) {
      await raw.exec('ROLLBACK');
      throw e;
    }
  };
  return {
    raw,
    schema: async () => {
      const out: Record<string, string[]> = {};
      const columns = await raw.all<{ table_name: string; column_name: string }>(
        "SELECT c.relname AS table_name, a.attname AS column_name FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'ql3' AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped ORDER BY c.relname, a.attnum",
      );
      for (const c of columns) (out[c.table_name] ??= []).push(c.column_name);
      return out;
    },
    rows: async (table, where, params) => raw.all(`SELECT ctid::text AS _key, * FROM ql3.${table} WHERE ${where}`, params),
    set: async (table, key, column, value) => {
      try {
        const [row] = await asReplica(() => raw.all<{ _key: string }>(`UPDATE ql3.${table} SET "${column}" = ? WHERE ctid = ?::tid RETURNING ctid::text AS _key`, [value, key]));
        return { applied: row !== undefined, key: row?._key ?? key };
      } catch (e) {
        return { applied: false, key, reason: (e as Error).message };
      }
    },
    remove: async (table, key) => {
      const [row] = await asReplica(() => raw.all<Record<string, unknown>>(`DELETE FROM ql3.${table} WHERE ctid = ?::tid RETURNING *`, [key]));
      if (row === undefined) throw new Error(`${table}: no row ${key}`);
      const back = reinsert(`ql3.${table}`, row, 'OVERRIDING SYSTEM VALUE '); // events.global_position is an identity column
      return { undo: () => asReplica(() => raw.run(back.sql, back.params)).then(() => undefined) };
    },
    insert: async (table, row) => {
      const put = reinsert(`ql3.${table}`, row);
      const [{ key }] = (await asReplica(() => raw.all<{ key: string }>(`${put.sql} RETURNING ctid::text AS key`, put.params))) as [{ key: string }];
      return { undo: () => asReplica(() => raw.run(`DELETE FROM ql3.${table} WHERE ctid = ?::tid`, [key])).then(() => undefined) };
    },
    close: () => raw.close(),
  };
};
