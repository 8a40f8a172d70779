// The part of a better-sqlite3 `Database` the public surface names, as our own types: the
// package's declarations then compile in a consumer that has no `@types/better-sqlite3` (or
// no better-sqlite3 at all). A better-sqlite3 `Database` is assignable to `SqliteDatabase`.

export interface SqliteRunResult {
  readonly changes: number;
  readonly lastInsertRowid: number | bigint;
}

export interface SqliteStatement {
  run(...params: unknown[]): SqliteRunResult;
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}

/** A better-sqlite3 `Database` (inject one with `{ database }`; the authority's own is `db`). */
export interface SqliteDatabase {
  readonly name: string;
  readonly open: boolean;
  readonly inTransaction: boolean;
  readonly readonly: boolean;
  readonly memory: boolean;
  prepare(source: string): SqliteStatement;
  exec(source: string): unknown;
  pragma(source: string, options?: { simple?: boolean }): unknown;
  close(): unknown;
}
