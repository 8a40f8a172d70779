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
  'start_replay_identities',
  'capabilities',
  'schema_migrations',
] as const;

export const openFreshSqlite = (hook?: StartStepHook, path = freshDbPath()): Promise<SqliteStartBarrier> =>
  openSqliteStartBarrier({ path, ...(hook ? { hooks: { onStartStep: hook } } : {}) });

export const sqliteCounts = (a: SqliteStartBarrier): Record<string, number> =>
  Object.fromEntries(SQLITE_TABLES.map((t) => [t, (a.db.prepare(`SELECT count(*) AS n FROM ${t}`).get() as { n: number }).n]));
