import { MigratedTemplate } from '../../testkit/postgresHarness';
import { openKeyedPostgres } from '../support/freshStores';
import { runToolCrashConformance } from './crashTool';
import { runToolRedactionConformance } from './redactionConformance';

describe('PostgreSQL runTool', function () {
  const template = new MigratedTemplate();
  after(() => template.dropAll());
  runToolCrashConformance({
    name: 'PostgreSQL (a fresh database shared with the killed runtime)',
    open: async () => {
      const fresh = await openKeyedPostgres(template);
      return { ...fresh, kind: 'postgres', location: fresh.db.url };
    },
  });
  runToolRedactionConformance({
    name: 'PostgreSQL, the CLI on the same database',
    open: async () => {
      const db = await template.clone();
      const authority = await openPostgresStartBarrier({ connectionString: db.url, plans: TEST_PLANS });
      return {
        authority,
        cli: ['--postgres', db.url],
        close: async () => {
          await authority.close();
          await db.drop();
        },
      };
    },
  });
});
