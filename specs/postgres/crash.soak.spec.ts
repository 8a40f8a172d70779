import { createDatabase, openOn } from '../../testkit/postgresHarness';
import { postgresRaw } from '../../testkit/rawSql';
import { START_ROWS_SQL, crashSuite } from '../conformance/crashConformance';

crashSuite({
  name: 'PostgreSQL',
  backend: 'postgres',
  modes: ['stepwise', 'batched'],
  parallel: true,
  open: async () => {
    const db = await createDatabase();
    const a = await openOn(db);
    return {
      target: db.url,
      authority: a,
      raw: () => postgresRaw(db.url),
      reopen: () => openOn(db),
      startRows: async (startId) => Number((await a.pool.query<{ n: string }>(START_ROWS_SQL((t) => `ql3.${t}`, '$1'), [startId])).rows[0]?.n),
      close: async () => {
        await a.close();
        await db.drop();
      },
    };
  },
});
