import { escapeIdentifier } from 'pg';
import { createDatabase, openOn } from '../../testkit/postgresHarness';
import { keyedEvidenceSuite, type KeyedStore } from '../conformance/keyedEvidenceConformance';
import { keyedLifecycleSuite } from '../conformance/keyedLifecycleConformance';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { expect } from 'chai';
import { setUp } from '../conformance/startBarrierConformance';

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
      removeSealOrigins: async () => {
        // past the append-only triggers, as the owner could
        const rows = await db.admin(async (c) => {
          await c.query('SET session_replication_role = replica');
          try {
            return (await c.query('DELETE FROM ql3.run_event_seal_origins RETURNING *')).rows;
          } finally {
            await c.query('SET session_replication_role = origin');
          }
        });
        return {
          undo: () =>
            db.admin(async (c) => {
              for (const r of rows) await c.query('INSERT INTO ql3.run_event_seal_origins (key_id, from_global_position, from_ms, legacy_gaps, mac) VALUES ($1, $2, $3, $4, $5)', [r.key_id, r.from_global_position, r.from_ms, r.legacy_gaps, r.mac]);
            }),
        };
      },
      close: () => db.drop(),
    };
  },
};
keyedEvidenceSuite(backend);
keyedLifecycleSuite({ ...backend, withoutKey: (store) => (store as PgKeyedStore).runtime() });

describe('R9.4 the seal tables on PostgreSQL: the runtime reads and inserts only, and nobody changes a seal', function () {
  this.timeout(60_000);
  it('R9.4 as ql3_runtime UPDATE, DELETE and TRUNCATE of run_event_macs and run_event_seal_origins are refused; as the owner the append-only triggers refuse them', async () => {
    const db = await createDatabase();
    try {
      const keyed = await openOn(db, { evidenceKeys: { active: { id: 'k1', secret: Buffer.alloc(32, 0x21) } } });
      const s = await setUp(keyed);
      await keyed.barriers.prepare(s.startCommand());
      await keyed.close();
      const statements = (table: string) => [`UPDATE ql3.${table} SET key_id = 'k2'`, `DELETE FROM ql3.${table}`, `TRUNCATE ql3.${table}`];
      for (const table of ['run_event_macs', 'run_event_seal_origins']) {
        await db.admin(async (c) => {
          expect(Number((await c.query(`SELECT count(*) AS n FROM ql3.${table}`)).rows[0].n), table).to.be.greaterThan(0);
          for (const sql of statements(table)) {
            const asRuntime = await c.query(`BEGIN; SET LOCAL ROLE ql3_runtime; ${sql}`).then(() => undefined, (e: Error) => e);
            await c.query('ROLLBACK');
            expect(asRuntime?.message, sql).to.match(/permission denied/);
            const asOwner = await c.query(`BEGIN; SET LOCAL ROLE ql3_owner; ${sql}`).then(() => undefined, (e: Error) => e);
            await c.query('ROLLBACK');
            expect(asOwner?.message, sql).to.contain('event seals are immutable');
          }
          const grants = (await c.query(`SELECT grantee, privilege_type FROM information_schema.role_table_grants WHERE table_schema = 'ql3' AND table_name = $1 AND grantee LIKE 'ql3_%' AND grantee <> 'ql3_owner' ORDER BY 1, 2`, [table])).rows;
          expect(grants, table).to.deep.equal([
            { grantee: 'ql3_runtime', privilege_type: 'INSERT' },
            { grantee: 'ql3_runtime', privilege_type: 'SELECT' },
          ]);
        });
      }
    } finally {
      await db.drop();
    }
  });
});
