import { openPostgresStartBarrier, type PostgresStartBarrier } from '../../infrastructure/postgres/postgresAuthority';
import { MigratedTemplate, countRows } from '../../testkit/postgresHarness';
import { droppingOnClose, durableContentConformance, hostileInputConformance } from './hostileInputConformance';

describe('hostile input on PostgreSQL', function () {
  this.timeout(120_000);
  const template = new MigratedTemplate();
  after(() => template.dropAll());
  const backend: Parameters<typeof hostileInputConformance>[0] = {
    name: 'PostgreSQL (pg, fresh database per test)',
    open: async () => {
      const db = await template.clone();
      return droppingOnClose(await openPostgresStartBarrier({ connectionString: db.url }), db);
    },
    counts: (a) => countRows((a as PostgresStartBarrier).pool),
  };
  hostileInputConformance(backend);
  durableContentConformance(backend);
});
