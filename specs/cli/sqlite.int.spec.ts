import Database from 'better-sqlite3';
import { join } from 'node:path';
import { freshDir } from '../support/tmp';
import { cliSuite } from './cliSuite';

cliSuite({
  name: 'SQLite (--db, real file)',
  open: async () => {
    const path = join(freshDir('cli-db'), 'barrier.db');
    return {
      args: ['--db', path],
      corruptBarrier: async (startId) => {
        const raw = new Database(path);
        try {
          // the trigger is made again: the damage is the row, not a schema an open refuses
          const guard = raw.prepare("SELECT sql FROM sqlite_master WHERE name = 'tool_execution_start_barriers_no_update'").get() as { sql: string };
          raw.exec('DROP TRIGGER tool_execution_start_barriers_no_update');
          raw.prepare("UPDATE tool_execution_start_barriers SET adapter_id = 'adapter.tampered' WHERE start_id = ?").run(startId);
          raw.exec(guard.sql);
        } finally {
          raw.close();
        }
      },
      holdLock: async () => {
        const raw = new Database(path);
        raw.exec('BEGIN IMMEDIATE'); // the one writer's lock: every start waits for it
        return {
          release: async () => {
            raw.exec('ROLLBACK');
            raw.close();
          },
        };
      },
      close: async () => undefined,
    };
  },
});
