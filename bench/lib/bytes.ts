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
  /**
   * What each table and index grew by (PostgreSQL: pg_relation_size; SQLite: dbstat pages) and
   * the bytes of the rows and index entries in them (SQLite: dbstat payload; PostgreSQL, where
   * pgstattuple can be created: live tuple bytes, and B-tree leaf bytes at their density):
   * where the bytes above the records are. Totals over `starts`.
   */
  readonly byObject?: Readonly<Record<string, ObjectBytes>>;
}

export interface ObjectBytes {
  readonly bytes: number;
  /** Bytes of the rows or index entries in those pages (as if every page were full). */
  readonly payload?: number;
}

/** The per-object growth between two snapshots, objects that did not grow left out. */
const grownObjects = (before: Readonly<Record<string, ObjectBytes>>, after: Readonly<Record<string, ObjectBytes>>): Record<string, ObjectBytes> =>
  Object.fromEntries(
    Object.entries(after)
      .map(([name, a]): [string, ObjectBytes] => {
        const b = before[name];
        const bytes = a.bytes - (b?.bytes ?? 0);
        return [name, a.payload === undefined ? { bytes } : { bytes, payload: a.payload - (b?.payload ?? 0) }];
      })
      .filter(([, g]) => g.bytes !== 0 || (g.payload ?? 0) !== 0),
  );

/** The canonical JSON of the five records a start commits: barrier, audit event, trace anchor, receipt, mutation. */
export const canonicalBytesOfStart = (w: StartWrite): number =>
  [w.rows.json.barrier, w.rows.json.audit, w.rows.json.trace, w.rows.json.receipt, w.rows.json.mutation].reduce((n, j) => n + utf8Length(j), 0);

interface PerStart {
  tableBytes: number;
  walBytes: number;
  byObject?: Readonly<Record<string, ObjectBytes>>;
}

/** Per start, from totals over `starts`. */
export const perStart = (b: BytesPerStart): PerStart => ({
  tableBytes: b.tableBytes / b.starts,
  walBytes: b.walBytes / b.starts,
  ...(b.byObject === undefined
    ? {}
    : {
        byObject: Object.fromEntries(
          Object.entries(b.byObject).map(([k, o]) => [k, o.payload === undefined ? { bytes: o.bytes / b.starts } : { bytes: o.bytes / b.starts, payload: o.payload / b.starts }]),
        ),
      }),
});

/**
 * The smallest figure of several rounds: other sessions' WAL on a shared server only ever adds.
 * The per-object growth is the one of the round with the least table growth.
 */
export const leastOf = (rounds: readonly BytesPerStart[]): PerStart => {
  const per = rounds.map(perStart);
  const least = per.reduce((x, y) => (y.tableBytes < x.tableBytes ? y : x));
  return { tableBytes: least.tableBytes, walBytes: Math.min(...per.map((p) => p.walBytes)), ...(least.byObject === undefined ? {} : { byObject: least.byObject }) };
};

// ------------------------------------------------------------------------------ PostgreSQL

interface PgMark {
  readonly tableBytes: number;
  readonly lsn: string;
}

const PG_MARK = `SELECT (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                          WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast'))::bigint AS table_bytes,
                        pg_current_wal_lsn()::text AS lsn`;

// Every relation of the tables counted above: heap, indexes, TOAST and its index (named after
// their table), with the bytes of what they hold when pgstattuple is there ($1).
const PG_OBJECTS = `SELECT CASE WHEN n.nspname = 'pg_toast' THEN o.relname || CASE WHEN c.relkind = 'i' THEN ' (TOAST index)' ELSE ' (TOAST)' END ELSE c.relname END AS name,
       pg_relation_size(c.oid)::bigint AS bytes,
       CASE WHEN NOT $1::boolean THEN NULL
            WHEN c.relkind IN ('r', 't') THEN (SELECT tuple_len FROM pgstattuple(c.oid))
            WHEN am.amname = 'btree' THEN (SELECT CASE WHEN s.leaf_pages = 0 OR s.avg_leaf_density = 'NaN' THEN 0
                                                       ELSE round(s.leaf_pages * current_setting('block_size')::int * s.avg_leaf_density / 100) END
                                             FROM pgstatindex(c.oid) s)
       END::bigint AS payload
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_am am ON am.oid = c.relam
  LEFT JOIN pg_index x ON x.indexrelid = c.oid AND n.nspname = 'pg_toast'
  LEFT JOIN pg_class o ON o.reltoastrelid = coalesce(x.indrelid, c.oid) AND n.nspname = 'pg_toast'
  WHERE c.relkind IN ('r', 'i', 't') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
    AND (n.nspname <> 'pg_toast' OR (o.oid IS NOT NULL AND o.relnamespace <> 'pg_catalog'::regnamespace))`;

/** Whether this database can count row bytes: pgstattuple (a contrib extension) created here, once per pool. */
const statOn = new WeakMap<Pool, Promise<boolean>>();
const canStat = (pool: Pool): Promise<boolean> => {
  let on = statOn.get(pool);
  if (on === undefined) {
    on = pool.query('CREATE EXTENSION IF NOT EXISTS pgstattuple').then(
      () => true,
      () => false,
    );
    statOn.set(pool, on);
  }
  return on;
};

const pgObjects = async (pool: Pool): Promise<Record<string, ObjectBytes>> => {
  const { rows } = await pool.query<{ name: string; bytes: string; payload: string | null }>(PG_OBJECTS, [await canStat(pool)]);
  return Object.fromEntries(rows.map((r) => [r.name, r.payload === null ? { bytes: Number(r.bytes) } : { bytes: Number(r.bytes), payload: Number(r.payload) }]));
};

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
  const objectsBefore = await pgObjects(pool);
  const before = await pgMark(pool);
  const value = await body();
  const after = await pgMark(pool);
  const objectsAfter = await pgObjects(pool);
  const { rows } = await pool.query<{ wal: string }>('SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint AS wal', [after.lsn, before.lsn]);
  return { value, bytes: { starts, tableBytes: after.tableBytes - before.tableBytes, walBytes: Number(rows[0]!.wal), byObject: grownObjects(objectsBefore, objectsAfter) } };
};

// ---------------------------------------------------------------------------------- SQLite

/**
 * File and WAL growth over `body` on one SQLite connection: the WAL is truncated first and not
 * checkpointed during `body`, so its size is every frame the starts appended; then it is
 * checkpointed into the file, whose page count gives the table growth.
 */
export const sqliteBytesAround = async <T>(db: Database.Database, path: string, starts: number, body: () => Promise<T>): Promise<{ value: T; bytes: BytesPerStart }> => {
  const pages = () => (db.pragma('page_count', { simple: true }) as number) - (db.pragma('freelist_count', { simple: true }) as number);
  const objects = () =>
    Object.fromEntries(
      (db.prepare('SELECT name, sum(pgsize) AS bytes, sum(payload) AS payload FROM dbstat GROUP BY name').all() as { name: string; bytes: number; payload: number }[]).map((r) => [
        r.name,
        { bytes: r.bytes, payload: r.payload },
      ]),
    );
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  const autocheckpoint = db.pragma('wal_autocheckpoint', { simple: true }) as number;
  db.pragma('wal_checkpoint(TRUNCATE)');
  const pagesBefore = pages();
  const objectsBefore = objects();
  db.pragma('wal_autocheckpoint = 0');
  try {
    const value = await body();
    const walBytes = statSync(`${path}-wal`).size;
    db.pragma('wal_checkpoint(TRUNCATE)');
    return { value, bytes: { starts, tableBytes: (pages() - pagesBefore) * pageSize, walBytes, byObject: grownObjects(objectsBefore, objects()) } };
  } finally {
    db.pragma(`wal_autocheckpoint = ${autocheckpoint}`);
  }
};
