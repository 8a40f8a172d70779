import type { SqliteStartBarrier } from '../../infrastructure/sqlite';
import { conformanceSuite } from '../conformance/startBarrierConformance';
import { rebuildSuite } from '../conformance/rebuildConformance';
import { openFreshSqlite, sqliteCounts } from './support';

conformanceSuite({
  name: 'SQLite (better-sqlite3, real file)',
  open: (hook) => openFreshSqlite(hook),
  counts: async (a) => sqliteCounts(a as SqliteStartBarrier),
});

rebuildSuite({
  name: 'SQLite (better-sqlite3, real file)',
  open: () => openFreshSqlite(),
  rows: async (a, table) => (a as SqliteStartBarrier).db.prepare(`SELECT * FROM ${table}`).all() as Record<string, unknown>[],
});
