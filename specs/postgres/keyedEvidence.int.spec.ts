import { escapeIdentifier } from 'pg';
import { createDatabase, openOn } from '../../testkit/postgresHarness';
import { keyedEvidenceSuite } from '../conformance/keyedEvidenceConformance';

keyedEvidenceSuite({
  name: 'PostgreSQL',
  create: async () => {
    const db = await createDatabase();
    return {
      open: (keys) => openOn(db, keys === undefined ? {} : { evidenceKeys: keys }),
      dump: () =>
        db.admin(async (c) => {
          const tables = (await c.query<{ name: string }>("SELECT tablename AS name FROM pg_tables WHERE schemaname = 'ql3'")).rows;
          const all = [];
          for (const { name } of tables) all.push((await c.query(`SELECT * FROM ql3.${escapeIdentifier(name)}`)).rows);
          return JSON.stringify(all);
        }),
      close: () => db.drop(),
    };
  },
});
