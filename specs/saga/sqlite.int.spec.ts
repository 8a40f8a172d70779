import Database from 'better-sqlite3';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { freshDbPath } from '../support/tmp';
import { withTriggersDropped } from '../../testkit/damage';
import { sagaConformance, type SagaBackend } from './sagaConformance';
import { executionConformance } from './executionConformance';
import { TEST_PLANS } from '../../testkit/planKeys';

const raw = <T>(path: string, body: (db: Database.Database) => T): T => {
  const db = new Database(path);
  try {
    return body(db);
  } finally {
    db.close();
  }
};

const backend: SagaBackend = {
  name: 'SQLite (real file; the adapter reads through a second connection)',
  open: async (plans = TEST_PLANS) => {
    const path = freshDbPath('saga');
    const authority = await openSqliteStartBarrier(plans === null ? { path } : { path, plans });
    const reader = await openSqliteStartBarrier({ path });
    return {
      authority,
      separateRead: (id) => reader.barriers.getByStartId(id),
      target: { kind: 'sqlite', location: path },
      planRow: async (id) => raw(path, (db) => (db.prepare('SELECT * FROM invocation_plans WHERE start_id = ?').get(id) as Record<string, unknown> | undefined) ?? null),
      // past the file's own guard (the shred-only trigger), as an attacker with the file would
      damagePlan: async (id, column, value) =>
        raw(path, (db) => void withTriggersDropped(db, (t) => t.tbl_name === 'invocation_plans', () => db.prepare(`UPDATE invocation_plans SET ${column} = ? WHERE start_id = ?`).run(value, id))),
      reopen: (other) => openSqliteStartBarrier({ path, plans: other }),
      close: async () => {
        await reader.close();
        await authority.close();
      },
    };
  },
};
sagaConformance(backend);
executionConformance(backend);
