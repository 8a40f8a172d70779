import type Database from 'better-sqlite3';
import { loadMigrations } from '../../infrastructure/migrations';
import * as SQL from '../../infrastructure/sqlite/sql';
import { registerMigrationFunctions } from '../../infrastructure/sqlite/fileIdentity';

/** Applies the migrations before `before` as the migrator does (one transaction, recorded): an old store to upgrade. */
export const migrateUpTo = (db: Database.Database, before: string): void => {
  registerMigrationFunctions(db);
  db.pragma('foreign_keys = ON');
  db.exec(SQL.MIGRATIONS_TABLE);
  const applied = new Set((db.prepare(SQL.SELECT_APPLIED).all() as { name: string }[]).map((r) => r.name));
  db.exec('BEGIN IMMEDIATE');
  for (const m of loadMigrations('sqlite').filter((m) => m.name < before && !applied.has(m.name))) {
    db.exec(m.sql);
    db.prepare(SQL.INSERT_APPLIED).run(m.name, m.checksum, Date.now());
  }
  db.exec('COMMIT');
};
