import Database from 'better-sqlite3';
import type { StepRunRow } from '../../projections/rows';
import { headForgerySuite } from '../conformance/headForgeryConformance';
import { freshDbPath } from '../support/tmp';
import { openFreshSqlite } from './support';

/** A process with the file: drops the StepRun head's guard triggers, rewrites the row, puts the triggers back, in one transaction. */
const rewriteHeadIn = (path: string) => async (row: StepRunRow): Promise<void> => {
  const db = new Database(path);
  try {
    const guards = db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'step_runs'").all() as { name: string; sql: string }[];
    db.transaction(() => {
      for (const g of guards) db.exec(`DROP TRIGGER ${g.name}`);
      db.prepare('UPDATE step_runs SET status = ?, version = ?, digest = ?, state_json = ? WHERE run_id = ? AND step_run_id = ?')
        .run(row.status, row.version, row.digest, row.state_json, row.run_id, row.step_run_id);
      for (const g of guards) db.exec(g.sql);
    })();
  } finally {
    db.close();
  }
};

headForgerySuite({
  name: 'SQLite',
  open: async () => {
    const path = freshDbPath();
    const authority = await openFreshSqlite(undefined, path);
    return { authority, rewriteHead: rewriteHeadIn(path), close: () => authority.close() };
  },
});
