import { keyedIdentitiesSql } from '../../infrastructure/sqlite/identities';
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
  // the replay identities are the facts' own keys: each held value, with the start its row names
  rows: async (a, table) =>
    (a as SqliteStartBarrier).db.prepare(table === 'start_replay_identities' ? keyedIdentitiesSql() : `SELECT * FROM ${table}`).all() as Record<string, unknown>[],
});
