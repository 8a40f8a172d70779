import { openRecoverablePostgresStartBarrier, type RecoverablePostgresStartBarrier } from '../../infrastructure/postgres/recovery';
import { MigratedTemplate, countRows } from '../postgres/harness';
import { droppingOnClose, durableContentConformance, hostileInputConformance } from './hostileInputConformance';

describe('hostile input on PostgreSQL', function () {
  this.timeout(120_000);
  const template = new MigratedTemplate();
  after(() => template.dropAll());
  const backend: Parameters<typeof hostileInputConformance>[0] = {
    name: 'PostgreSQL (pg, fresh database per test)',
    open: async () => {
      const db = await template.clone();
      return droppingOnClose(await openRecoverablePostgresStartBarrier({ connectionString: db.url }), db);
    },
    counts: (a) => countRows((a as RecoverablePostgresStartBarrier).pool),
  };
  hostileInputConformance(backend);
  durableContentConformance(backend);
});
