import Database from 'better-sqlite3';
import { Pool } from 'pg';
import { openPostgresStartBarrier } from '../infrastructure/postgres';
import { openSqliteStartBarrier } from '../infrastructure/sqlite';
import type { ForgeryTarget, Statement } from './forgery';
import { postgresRaw, sqliteRaw, toDollarParams } from './rawSql';

// The two stores a forgery needs (the one under attack and a source of starts to copy), with
// the attacker's connection: PostgreSQL's runtime role (`ql3_runtime`, as a runtime replica
// with `migrate: false` connects) or, on SQLite, a plain process opening the file (foreign
// keys as SQLite defaults them: off).

export interface OpenTarget {
  readonly target: ForgeryTarget;
  close(): Promise<void>;
}

export const postgresForgeryTarget = async (url: string, sourceUrl: string): Promise<OpenTarget> => {
  const authority = await openPostgresStartBarrier({ connectionString: url });
  const source = await openPostgresStartBarrier({ connectionString: sourceUrl });
  const raw = await postgresRaw(url);
  const sourceRaw = await postgresRaw(sourceUrl);
  const runtime = new Pool({ connectionString: url, options: '-c role=ql3_runtime', max: 1 });
  runtime.on('error', () => undefined);
  const forge = async (statements: readonly Statement[]): Promise<void> => {
    const c = await runtime.connect();
    try {
      await c.query('BEGIN');
      for (const s of statements) await c.query(toDollarParams(s.sql), [...s.params]);
      await c.query('COMMIT');
    } catch (e) {
      await c.query('ROLLBACK').catch(() => undefined);
      throw e;
    } finally {
      c.release();
    }
  };
  return {
    target: { backend: 'postgres', authority, source, raw, sourceRaw, forge },
    close: async () => {
      await runtime.end();
      await Promise.all([raw.close(), sourceRaw.close(), authority.close(), source.close()]);
    },
  };
};

export const sqliteForgeryTarget = async (path: string, sourcePath: string): Promise<OpenTarget> => {
  const authority = await openSqliteStartBarrier({ path });
  const source = await openSqliteStartBarrier({ path: sourcePath });
  const raw = sqliteRaw(path);
  const sourceRaw = sqliteRaw(sourcePath);
  const attacker = new Database(path);
  attacker.pragma('busy_timeout = 10000');
  const forge = async (statements: readonly Statement[]): Promise<void> => {
    attacker.transaction(() => {
      for (const s of statements) attacker.prepare(s.sql).run(...s.params);
    })();
  };
  return {
    target: { backend: 'sqlite', authority, source, raw, sourceRaw, forge },
    close: async () => {
      attacker.close();
      await Promise.all([raw.close(), sourceRaw.close(), authority.close(), source.close()]);
    },
  };
};
