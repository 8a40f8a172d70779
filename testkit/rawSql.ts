import Database from 'better-sqlite3';
import { Client } from 'pg';

// A privileged, backend-neutral SQL connection beside the authority: the harness reads the
// stored rows itself (to check wholeness without trusting the code under test) and, in the
// corruption sweep, damages them. SQL is written once with `?` placeholders and unqualified
// table names through `t()`; PostgreSQL gets `$n` and schema ql3.

export type BackendName = 'sqlite' | 'postgres';

export interface RawSql {
  readonly dialect: BackendName;
  /** The table name as this dialect must spell it (`ql3.x` on PostgreSQL). */
  t(table: string): string;
  all<T extends object = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<T[]>;
  /** A statement that changes rows; returns how many it changed. */
  run(sql: string, params?: readonly unknown[]): Promise<number>;
  exec(sql: string): Promise<void>;
  /** Every table the store owns. */
  tables(): Promise<string[]>;
  close(): Promise<void>;
}

/** `?` -> `$1, $2, …` (the harness's SQL never holds a literal question mark). */
export const toDollarParams = (sql: string): string => {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
};

export const sqliteRaw = (path: string, options: { readonly readonly?: boolean } = {}): RawSql => {
  const db = new Database(path, { readonly: options.readonly ?? false });
  db.pragma('busy_timeout = 10000');
  return {
    dialect: 'sqlite',
    t: (table) => table,
    all: async <T extends object>(sql: string, params: readonly unknown[] = []) => db.prepare(sql).all(...params) as T[],
    run: async (sql, params = []) => db.prepare(sql).run(...params).changes,
    exec: async (sql) => void db.exec(sql),
    tables: async () =>
      (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as { name: string }[]).map((r) => r.name),
    close: async () => void db.close(),
  };
};

/** `url` must reach the database as a superuser (the owner's tools: triggers, indexes). */
export const postgresRaw = async (url: string): Promise<RawSql> => {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  // A server that dies under us must not crash the harness: the next query fails instead.
  client.on('error', () => undefined);
  await client.connect();
  return {
    dialect: 'postgres',
    t: (table) => `ql3.${table}`,
    all: async <T extends object>(sql: string, params: readonly unknown[] = []) => (await client.query(toDollarParams(sql), [...params])).rows as T[],
    run: async (sql, params = []) => (await client.query(toDollarParams(sql), [...params])).rowCount ?? 0,
    exec: async (sql) => void (await client.query(sql)),
    tables: async () =>
      (await client.query<{ name: string }>("SELECT tablename AS name FROM pg_tables WHERE schemaname = 'ql3' ORDER BY tablename")).rows.map((r) => r.name),
    close: async () => {
      await client.end().catch(() => undefined);
    },
  };
};

/** Row count of every table (what "no table gains a row" compares). */
export const tableCounts = async (raw: RawSql): Promise<Record<string, number>> => {
  const out: Record<string, number> = {};
  for (const table of await raw.tables()) {
    const [row] = await raw.all<{ n: number | string }>(`SELECT count(*) AS n FROM ${raw.t(table)}`);
    out[table] = Number(row?.n ?? 0);
  }
  return out;
};

/** Tables whose count differs between two snapshots, as `table: before -> after`. */
export const countChanges = (before: Record<string, number>, after: Record<string, number>): string[] =>
  [...new Set([...Object.keys(before), ...Object.keys(after)])]
    .filter((t) => before[t] !== after[t])
    .map((t) => `${t}: ${before[t] ?? 0} -> ${after[t] ?? 0}`);
