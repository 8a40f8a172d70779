import type { StartBarrierAuthority } from '../../application/authority';
import type { PostgresStartBarrier, PostgresStartBarrierOptions, PostgresWriteMode } from '../../infrastructure/postgres';
import { conformanceSuite } from '../conformance/startBarrierConformance';
import { rebuildSuite } from '../conformance/rebuildConformance';
import { MigratedTemplate, countRows, openOn } from '../../testkit/postgresHarness';

// The shared suites, unchanged, against the real server: each test gets a fresh database
// (a clone of a migrated template), dropped when the authority closes. The conformance suite
// runs once per write mode, so the one-statement production path and the statement-per-step
// path both pass.

type PooledAuthority = StartBarrierAuthority & { pool: PostgresStartBarrier['pool'] };

/** An authority on a fresh clone of `template`; closing it drops the clone. */
const openOnClone = async (template: MigratedTemplate, options: Partial<PostgresStartBarrierOptions> = {}): Promise<PooledAuthority> => {
  const db = await template.clone();
  const a = await openOn(db, options);
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
};

const register = (writeMode: PostgresWriteMode): void => {
  const template = new MigratedTemplate();
  after(() => template.dropAll());
  conformanceSuite({
    name: `PostgreSQL (pg, SERIALIZABLE, ${writeMode})`,
    open: (hook) => openOnClone(template, { writeMode, ...(hook ? { hooks: { onStartStep: hook } } : {}) }),
    counts: (a) => countRows((a as PooledAuthority).pool),
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
    open: () => openOnClone(template),
    rows: async (a, table) => (await (a as PooledAuthority).pool.query(`SELECT * FROM ql3.${table}`)).rows as Record<string, unknown>[],
    replayIndexTable: false,
  });
});
