import { openPostgresStartBarrier } from '../../infrastructure/postgres/postgresAuthority';
import { MigratedTemplate } from '../../testkit/postgresHarness';
import { adaptersKeepTheirWord, claimLeasesBounded } from './keepTheirWord';
import { TEST_PLANS } from '../../testkit/planKeys';

describe('PostgreSQL adapters keep what they declare', function () {
  this.timeout(180_000);
  const template = new MigratedTemplate();
  after(() => template.dropAll());
  const postgres = {
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
  };
  adaptersKeepTheirWord(postgres);
  claimLeasesBounded(postgres);
});
