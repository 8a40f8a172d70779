import { MigratedTemplate } from '../../testkit/postgresHarness';
import { adapterConformance } from './adapterConformance';
import { openKeyedPostgres } from '../support/freshStores';

describe('PostgreSQL real adapters', function () {
  this.timeout(120_000);
  const template = new MigratedTemplate();
  after(() => template.dropAll());
  adapterConformance({
    name: 'PostgreSQL (fresh database)',
    open: () => openKeyedPostgres(template),
  });
});
