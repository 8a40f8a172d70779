import { statSync } from 'node:fs';
import type Database from 'better-sqlite3';
import type { Pool } from 'pg';
import { utf8Length } from '../../domain';
import type { StartWrite } from './startRows';

// Bytes per start: what the tables and the write-ahead log grow by, beside the canonical bytes
// of the records the start commits (the floor any store must write once).

export interface BytesPerStart {
  readonly starts: number;
  /** Tables and their indexes (PostgreSQL: pg_total_relation_size; SQLite: database file pages). */
  readonly tableBytes: number;
  /** WAL written (PostgreSQL: pg_current_wal_lsn delta; SQLite: WAL frames appended). */
  readonly walBytes: number;
}

/** The canonical JSON of the five records a start commits: barrier, audit event, trace anchor, receipt, mutation. */
export const canonicalBytesOfStart = (w: StartWrite): number =>
  [w.rows.json.barrier, w.rows.json.audit, w.rows.json.trace, w.rows.json.receipt, w.rows.json.mutation].reduce((n, j) => n + utf8Length(j), 0);

/** Per start, from totals over `starts`. */
export const perStart = (b: BytesPerStart): { tableBytes: number; walBytes: number } => ({ tableBytes: b.tableBytes / b.starts, walBytes: b.walBytes / b.starts });

/** The smallest figure of several rounds: other sessions' WAL on a shared server only ever adds. */
export const leastOf = (rounds: readonly BytesPerStart[]): { tableBytes: number; walBytes: number } => {
  const per = rounds.map(perStart);
  return { tableBytes: Math.min(...per.map((p) => p.tableBytes)), walBytes: Math.min(...per.map((p) => p.walBytes)) };
};

// ------------------------------------------------------------------------------ PostgreSQL

interface PgMark {
  readonly tableBytes: number;
  readonly lsn: string;
}

const PG_MARK = `SELECT (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                          WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast'))::bigint AS table_bytes,
                        pg_current_wal_lsn()::text AS lsn`;

const pgMark = async (pool: Pool): Promise<PgMark> => {
  const { rows } = await pool.query<{ table_bytes: string; lsn: string }>(PG_MARK);
  return { tableBytes: Number(rows[0]!.table_bytes), lsn: rows[0]!.lsn };
};

/**
 * Table growth of this database and WAL written over `body` (`starts` starts). The WAL is the
 * cluster's: on a shared server it includes other sessions' writes, so callers keep the least
 * of several rounds.
 */
export const pgBytesAround = async <T>(pool: Pool, starts: number, body: () => Promise<T>): Promise<{ value: T; bytes: BytesPerStart }> => {
  // Pages freed by earlier deletes would hide growth; a checkpoint-free mark is enough here.
  const before = await pgMark(pool);
  const value = await body();
  const after = await pgMark(pool);
  const { rows } = await pool.query<{ wal: string }>('SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint AS wal', [after.lsn, before.lsn]);
  return { value, bytes: { starts, tableBytes: after.tableBytes - before.tableBytes, walBytes: Number(rows[0]!.wal) } };
};

// ---------------------------------------------------------------------------------- SQLite

/**
 * File and WAL growth over `body` on one SQLite connection: the WAL is truncated first and not
 * checkpointed during `body`, so its size is every frame the starts appended; then it is
 * checkpointed into the file, whose page count gives the table growth.
 */
export const sqliteBytesAround = async <T>(db: Database.Database, path: string, starts: number, body: () => Promise<T>): Promise<{ value: T; bytes: BytesPerStart }> => {
  const pages = () => (db.pragma('page_count', { simple: true }) as number) - (db.pragma('freelist_count', { simple: true }) as number);
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  const autocheckpoint = db.pragma('wal_autocheckpoint', { simple: true }) as number;
  db.pragma('wal_checkpoint(TRUNCATE)');
  const pagesBefore = pages();
  db.pragma('wal_autocheckpoint = 0');
  try {
    const value = await body();
    const walBytes = statSync(`${path}-wal`).size;
    db.pragma('wal_checkpoint(TRUNCATE)');
    return { value, bytes: { starts, tableBytes: (pages() - pagesBefore) * pageSize, walBytes } };
  } finally {
    db.pragma(`wal_autocheckpoint = ${autocheckpoint}`);
  }
};
