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
      const { authority, cliArgs, close } = await openKeyedPostgres(template);
      return { authority, cli: cliArgs, close };
    },
  });
});
