import type { StartBarrierAuthority } from '../../application/authority';
import type { PostgresStartBarrier, PostgresWriteMode } from '../../infrastructure/postgres';
import { conformanceSuite } from '../conformance/startBarrierConformance';
import { rebuildSuite } from '../conformance/rebuildConformance';
import { MigratedTemplate, countRows, openOn } from '../../testkit/postgresHarness';

// The shared suite, unchanged, against the real server: each test gets a fresh database
// (a clone of a migrated template), dropped when the authority closes. Run once per write
// mode, so the one-statement production path and the statement-per-step path both pass.

const register = (writeMode: PostgresWriteMode): void => {
  const template = new MigratedTemplate();
  after(() => template.dropAll());
  conformanceSuite({
    name: `PostgreSQL (pg, SERIALIZABLE, ${writeMode})`,
    open: async (hook) => {
      const db = await template.clone();
      const a = await openOn(db, { writeMode, ...(hook ? { hooks: { onStartStep: hook } } : {}) });
      const authority: StartBarrierAuthority & { pool: PostgresStartBarrier['pool'] } = {
        backend: a.backend,
        runs: a.runs,
        barriers: a.barriers,
        pool: a.pool,
        close: async () => {
          await a.close();
          await db.drop();
        },
      };
      return authority;
    },
    counts: (a) => countRows((a as unknown as PostgresStartBarrier).pool),
  });
};

describe('PostgreSQL conformance', function () {
  this.timeout(120_000);
  register('batched');
  register('stepwise');

  const template = new MigratedTemplate();
  after(() => template.dropAll());
  rebuildSuite({
    name: 'PostgreSQL (pg, SERIALIZABLE)',
    open: async () => {
      const db = await template.clone();
      const a = await openOn(db);
      return {
        backend: a.backend,
        runs: a.runs,
        barriers: a.barriers,
        pool: a.pool,
        close: async () => {
          await a.close();
          await db.drop();
        },
      };
    },
    rows: async (a, table) => (await (a as unknown as PostgresStartBarrier).pool.query(`SELECT * FROM ql3.${table}`)).rows as Record<string, unknown>[],
  });
});
