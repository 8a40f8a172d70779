import { openPostgresStartBarrier } from '../../infrastructure/postgres/postgresAuthority';
import { MigratedTemplate } from '../../testkit/postgresHarness';
import { adapterConformance } from './adapterConformance';
import { TEST_PLANS } from '../../testkit/planKeys';

describe('PostgreSQL real adapters', function () {
  this.timeout(120_000);
  const template = new MigratedTemplate();
  after(() => template.dropAll());
  adapterConformance({
    name: 'PostgreSQL (fresh database)',
    open: async () => {
      const db = await template.clone();
      const authority = await openPostgresStartBarrier({ connectionString: db.url, plans: TEST_PLANS });
      return {
        authority,
        cliArgs: ['--postgres', db.url],
        close: async () => {
          await authority.close();
          await db.drop();
        },
      };
    },
  });
});
