import type { SqliteStartBarrier } from '../../infrastructure/sqlite';
import { openFreshSqlite, sqliteCounts } from '../sqlite/support';
import { durableContentConformance, hostileInputConformance } from './hostileInputConformance';

const backend: Parameters<typeof hostileInputConformance>[0] = {
  name: 'SQLite (better-sqlite3, real file)',
  open: () => openFreshSqlite(),
  counts: async (a) => sqliteCounts(a as SqliteStartBarrier),
};
hostileInputConformance(backend);
durableContentConformance(backend);
