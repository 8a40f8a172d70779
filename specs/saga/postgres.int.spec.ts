import { openPostgresStartBarrier } from '../../infrastructure/postgres/postgresAuthority';
import { MigratedTemplate } from '../../testkit/postgresHarness';
import { sagaConformance, type SagaBackend } from './sagaConformance';
import { executionConformance } from './executionConformance';
import { TEST_PLANS } from '../../testkit/planKeys';

describe('PostgreSQL saga', function () {
  this.timeout(120_000);
  const template = new MigratedTemplate();
  after(() => template.dropAll());
  const backend: SagaBackend = {
    name: 'PostgreSQL (fresh database; the adapter reads through a second pool)',
    open: async (plans = TEST_PLANS) => {
      const db = await template.clone();
      const authority = await openPostgresStartBarrier(plans === null ? { connectionString: db.url } : { connectionString: db.url, plans });
      const reader = await openPostgresStartBarrier({ connectionString: db.url });
      return {
        authority,
        separateRead: (id) => reader.barriers.getByStartId(id),
        target: { kind: 'postgres', location: db.url },
        planRow: async (id) => (await reader.pool.query('SELECT * FROM ql3.invocation_plans WHERE start_id = $1', [id])).rows[0] ?? null,
        // past the database's own guard (the shred-only trigger), as the owner could
        damagePlan: async (id, column, value) => {
          const c = await reader.pool.connect();
          try {
            await c.query('BEGIN');
            await c.query('SET LOCAL session_replication_role = replica');
            await c.query(`UPDATE ql3.invocation_plans SET ${column} = $1 WHERE start_id = $2`, [value, id]);
            await c.query('COMMIT');
          } finally {
            c.release();
          }
        },
        reopen: (other) => openPostgresStartBarrier({ connectionString: db.url, plans: other }),
        close: async () => {
          await reader.close();
          await authority.close();
          await db.drop();
        },
      };
    },
  };
  sagaConformance(backend);
  executionConformance(backend);
});
