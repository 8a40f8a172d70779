import { openPostgresStartBarrier } from '../../infrastructure/postgres/postgresAuthority';
import { MigratedTemplate } from '../../testkit/postgresHarness';
import { sagaConformance } from './sagaConformance';

describe('PostgreSQL saga', function () {
  this.timeout(120_000);
  const template = new MigratedTemplate();
  after(() => template.dropAll());
  sagaConformance({
    name: 'PostgreSQL (fresh database; the adapter reads through a second pool)',
    open: async () => {
      const db = await template.clone();
      const authority = await openPostgresStartBarrier({ connectionString: db.url });
      const reader = await openPostgresStartBarrier({ connectionString: db.url });
      return {
        authority,
        separateRead: (id) => reader.barriers.getByStartId(id),
        target: { kind: 'postgres', location: db.url },
        close: async () => {
          await reader.close();
          await authority.close();
          await db.drop();
        },
      };
    },
  });
});
