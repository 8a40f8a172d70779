import type { SqliteStartBarrier } from '../../infrastructure/sqlite';
import { conformanceSuite } from '../conformance/startBarrierConformance';
import { openFreshSqlite, sqliteCounts } from './support';

conformanceSuite({
  name: 'SQLite (better-sqlite3, real file)',
  open: (hook) => openFreshSqlite(hook),
  counts: async (a) => sqliteCounts(a as SqliteStartBarrier),
});
