import { COMPACTION_STEPS, openSqliteRetention, openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { freshDbPath } from '../support/tmp';
import { sqliteRaw } from '../../testkit/rawSql';
import { START_ROWS_SQL, compactionCrashSuite, crashSuite } from '../conformance/crashConformance';

crashSuite({
  name: 'SQLite',
  backend: 'sqlite',
  modes: ['immediate'],
  parallel: false,
  open: async () => {
    const path = freshDbPath('crash');
    const a = await openSqliteStartBarrier({ path });
    return {
      target: path,
      authority: a,
      raw: async () => sqliteRaw(path),
      reopen: () => openSqliteStartBarrier({ path }),
      startRows: async (startId) => (a.db.prepare(START_ROWS_SQL((t) => t, '@id')).get({ id: startId }) as { n: number }).n,
      close: () => a.close(),
    };
  },
});

compactionCrashSuite({
  name: 'SQLite',
  steps: COMPACTION_STEPS,
  open: async () => {
    const target = freshDbPath('compaction-crash');
    return { target, authority: await openSqliteStartBarrier({ path: target }) };
  },
  reopen: async (path) => {
    const r = await openSqliteRetention({ path });
    return { authority: r.authority, compact: () => r.compact({ before: Date.now() + 3_600_000 }), close: () => r.close() };
  },
});
