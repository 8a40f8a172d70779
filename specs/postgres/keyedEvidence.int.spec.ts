import { escapeIdentifier } from 'pg';
import { createDatabase, openOn } from '../../testkit/postgresHarness';
import { keyedEvidenceSuite, type KeyedStore } from '../conformance/keyedEvidenceConformance';
import { keyedLifecycleSuite } from '../conformance/keyedLifecycleConformance';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';

type PgKeyedStore = KeyedStore & { runtime(): Promise<RecoverableStartBarrierAuthority> };

const backend = {
  name: 'PostgreSQL',
  create: async (): Promise<PgKeyedStore> => {
    const db = await createDatabase();
    return {
      open: (keys) => openOn(db, keys === undefined ? {} : { evidenceKeys: keys }),
      // the runtime's credentials without the key: what a forger with INSERT rights holds
      runtime: () => openOn(db, { poolConfig: { options: '-c role=ql3_runtime' }, migrate: false }),
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
};
keyedEvidenceSuite(backend);
keyedLifecycleSuite({ ...backend, withoutKey: (store) => (store as PgKeyedStore).runtime() });
