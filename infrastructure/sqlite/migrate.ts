import type Database from 'better-sqlite3';
import { loadMigrations, planMigrations } from '../migrations';
import * as SQL from './sql';

/** Applies the pending SQLite migrations in one `BEGIN IMMEDIATE`, or refuses (MigrationError). */
export const migrateSqlite = (db: Database.Database): void => {
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
