import type { SqliteStartBarrier } from '../../infrastructure/sqlite';
import { openFreshSqlite, sqliteCounts } from '../sqlite/support';
import { hostileInputConformance } from './hostileInputConformance';

hostileInputConformance({
  name: 'SQLite (better-sqlite3, real file)',
  open: () => openFreshSqlite(),
  counts: async (a) => sqliteCounts(a as SqliteStartBarrier),
});
