import { MigratedTemplate } from '../../testkit/postgresHarness';
import { adaptersKeepTheirWord, claimLeasesBounded } from './keepTheirWord';
import { openKeyedPostgres } from '../support/freshStores';

describe('PostgreSQL adapters keep what they declare', function () {
  this.timeout(180_000);
  const template = new MigratedTemplate();
  after(() => template.dropAll());
  const postgres = {
    name: 'PostgreSQL (fresh database)',
    open: () => openKeyedPostgres(template),
  };
  adaptersKeepTheirWord(postgres);
  claimLeasesBounded(postgres);
});
