import { PG_COMPACTION_STEPS, openPostgresRetention } from '../../infrastructure/postgres';
import { createDatabase, openOn, type TestDatabase } from '../../testkit/postgresHarness';
import { postgresRaw } from '../../testkit/rawSql';
import { START_ROWS_SQL, compactionCrashSuite, crashSuite } from '../conformance/crashConformance';

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
      startRows: async (startId) => Number((await a.pool.query<{ n: string }>(START_ROWS_SQL((t) => `ql3.${t}`, '$1', false), [startId])).rows[0]?.n),
      close: async () => {
        await a.close();
        await db.drop();
      },
    };
  },
});

const compactionDbs = new Map<string, TestDatabase>();
compactionCrashSuite({
  name: 'PostgreSQL',
  steps: PG_COMPACTION_STEPS,
  open: async () => {
    const db = await createDatabase();
    compactionDbs.set(db.url, db);
    return { target: db.url, authority: await openOn(db) };
  },
  reopen: async (url) => {
    const r = await openPostgresRetention({ connectionString: url });
    return {
      authority: r.authority,
      compact: () => r.compact({ before: Date.now() + 3_600_000 }),
      close: async () => {
        await r.close();
        await compactionDbs.get(url)?.drop();
        compactionDbs.delete(url);
      },
    };
  },
});
