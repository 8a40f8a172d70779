import type { SqliteStartBarrier } from '../../infrastructure/sqlite';
import { openFreshSqlite } from '../sqlite/support';
import { recoveryConformance } from './recoveryConformance';
import { rawSqlite } from './support';

recoveryConformance({
  name: 'SQLite (better-sqlite3, real file)',
  controlsClock: false,
  open: () => openFreshSqlite(),
  raw: (a) => rawSqlite(a as SqliteStartBarrier),
});
