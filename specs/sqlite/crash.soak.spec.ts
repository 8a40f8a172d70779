import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { freshDbPath } from '../support/tmp';
import { sqliteRaw } from '../../testkit/rawSql';
import { START_ROWS_SQL, crashSuite } from '../conformance/crashConformance';

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
