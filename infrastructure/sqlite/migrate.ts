import type Database from 'better-sqlite3';
import { loadMigrations, planMigrations } from '../migrations';
import { eventChainDigest } from '../../projections/eventChain';
import * as SQL from './sql';

/** Applies the pending SQLite migrations in one `BEGIN IMMEDIATE`, or refuses (MigrationError). */
export const migrateSqlite = (db: Database.Database): void => {
  // The chain back-fill (0061) computes links in SQL; SQLite has no sha256 of its own. The
  // function exists on the migrator's connection only: no trigger can call it (trusted_schema).
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
  db.exec(SQL.MIGRATIONS_TABLE);
  const known = loadMigrations('sqlite');
  db.exec('BEGIN IMMEDIATE');
  try {
    const applied = db.prepare(SQL.SELECT_APPLIED).all() as { name: string; checksum: string }[];
    for (const m of planMigrations(known, applied)) {
      db.exec(m.sql);
      db.prepare(SQL.INSERT_APPLIED).run(m.name, m.checksum, Date.now());
    }
    db.exec('COMMIT');
  } catch (e) {
    if (db.inTransaction) db.exec('ROLLBACK');
    throw e;
  }
};
