import Database from 'better-sqlite3';
import { join } from 'node:path';
import { freshDir } from '../support/tmp';
import { cliSuite } from './cliSuite';
import { withTriggersDropped } from '../../testkit/damage';

cliSuite({
  name: 'SQLite (--db, real file)',
  open: async () => {
    const path = join(freshDir('cli-db'), 'barrier.db');
    return {
      args: ['--db', path],
      corruptBarrier: async (startId) => {
        const raw = new Database(path);
        try {
          withTriggersDropped(
            raw,
            (t) => t.name === 'tool_execution_start_barriers_no_update',
            () => raw.prepare("UPDATE tool_execution_start_barriers SET adapter_id = 'adapter.tampered' WHERE start_id = ?").run(startId),
          );
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
