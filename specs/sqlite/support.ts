import { copyFileSync } from 'node:fs';
import { openSqliteStartBarrier, type SqliteStartBarrier } from '../../infrastructure/sqlite';
import type { StartStepHook } from '../../application/authority';
import { freshDbPath } from '../support/tmp';

export const SQLITE_TABLES = [
  'streams',
  'events',
  'runs',
  'step_runs',
  'security_audit_events',
  'trace_anchors',
  'audit_receipts',
  'step_run_mutations',
  'tool_execution_start_barriers',
  'capabilities',
  'schema_migrations',
] as const;

// A file migrated once per test process and copied for each spec: a copy opens as a freshly
// migrated store does (the file holds nothing else), without running the migrations again.
let template: Promise<string> | undefined;
export const migratedDbPath = async (): Promise<string> => {
  const from = await (template ??= (async () => {
    const made = freshDbPath('sb-template');
    await (await openSqliteStartBarrier({ path: made })).close();
    return made;
  })());
  const path = freshDbPath();
  copyFileSync(from, path);
  return path;
};

export const openFreshSqlite = async (hook?: StartStepHook, path?: string): Promise<SqliteStartBarrier> =>
  openSqliteStartBarrier({ path: path ?? (await migratedDbPath()), ...(hook ? { hooks: { onStartStep: hook } } : {}) });

export const sqliteCounts = (a: SqliteStartBarrier): Record<string, number> =>
  Object.fromEntries(SQLITE_TABLES.map((t) => [t, (a.db.prepare(`SELECT count(*) AS n FROM ${t}`).get() as { n: number }).n]));
