import Database from 'better-sqlite3';
import type { StepRunRow } from '../../projections/rows';
import { headForgerySuite } from '../conformance/headForgeryConformance';
import { freshDbPath } from '../support/tmp';
import { openFreshSqlite } from './support';

/** A process with the file: drops the guard triggers of `tables`, runs `body`, puts the triggers back, in one transaction. */
const pastGuards = (path: string, tables: readonly string[], body: (db: Database.Database) => void): void => {
  const db = new Database(path);
  try {
    const guards = db.prepare(`SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN (${tables.map(() => '?').join(', ')})`).all(...tables) as { name: string; sql: string }[];
    db.transaction(() => {
      for (const g of guards) db.exec(`DROP TRIGGER ${g.name}`);
      body(db);
      for (const g of guards) db.exec(g.sql);
    })();
  } finally {
    db.close();
  }
};

const rewriteHeadIn = (path: string) => async (row: StepRunRow): Promise<void> =>
  pastGuards(path, ['step_runs'], (db) => {
    db.prepare('UPDATE step_runs SET status = ?, version = ?, digest = ?, state_json = ? WHERE run_id = ? AND step_run_id = ?')
      .run(row.status, row.version, row.digest, row.state_json, row.run_id, row.step_run_id);
  });

const moveRunHeadsIn = (path: string) => async (runId: string, delta: number): Promise<void> =>
  pastGuards(path, ['runs', 'streams'], (db) => {
    db.prepare('UPDATE runs SET version = version + ? WHERE run_id = ?').run(delta, runId);
    db.prepare('UPDATE streams SET version = version + ? WHERE stream_id = ?').run(delta, `run-${runId}`);
  });

const rewriteRunCellIn = (path: string) => async (runId: string, column: string, value: string): Promise<() => Promise<void>> => {
  let before: unknown;
  pastGuards(path, ['runs'], (db) => {
    before = (db.prepare(`SELECT ${column} AS v FROM runs WHERE run_id = ?`).get(runId) as { v: unknown }).v;
    db.prepare(`UPDATE runs SET ${column} = ? WHERE run_id = ?`).run(value, runId);
  });
  return async () => pastGuards(path, ['runs'], (db) => void db.prepare(`UPDATE runs SET ${column} = ? WHERE run_id = ?`).run(before, runId));
};

const removeHeadIn = (path: string) => async (runId: string, stepRunId: string): Promise<() => Promise<void>> => {
  let row: StepRunRow | undefined;
  pastGuards(path, ['step_runs'], (db) => {
    row = db.prepare('SELECT * FROM step_runs WHERE run_id = ? AND step_run_id = ?').get(runId, stepRunId) as StepRunRow;
    db.prepare('DELETE FROM step_runs WHERE run_id = ? AND step_run_id = ?').run(runId, stepRunId);
  });
  return async () =>
    pastGuards(path, ['step_runs'], (db) => {
      const columns = Object.keys(row!);
      db.prepare(`INSERT INTO step_runs (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`).run(...columns.map((c) => row![c as keyof StepRunRow]));
    });
};

headForgerySuite({
  runHeads: true,
  name: 'SQLite',
  open: async () => {
    const path = freshDbPath();
    const authority = await openFreshSqlite(undefined, path);
    return { authority, rewriteHead: rewriteHeadIn(path), rewriteRunCell: rewriteRunCellIn(path), moveRunHeads: moveRunHeadsIn(path), removeHead: removeHeadIn(path), close: () => authority.close() };
  },
});
