import { openPostgresStartBarrier, type RecoverablePostgresStartBarrier } from '../../infrastructure/postgres/postgresAuthority';
import { MigratedTemplate } from '../../testkit/postgresHarness';
import { recoveryConformance } from './recoveryConformance';
import { rawPostgres } from './support';

describe('PostgreSQL recovery', function () {
  this.timeout(120_000);
  const template = new MigratedTemplate();
  after(() => template.dropAll());
  recoveryConformance({
    name: 'PostgreSQL (pg, fresh database per test)',
    controlsClock: false,
    open: async () => {
      const db = await template.clone();
      const a = await openPostgresStartBarrier({ connectionString: db.url });
      const close = a.close.bind(a);
      return Object.assign(a, {
        close: async () => {
          await close();
          await db.drop();
        },
      });
    },
    raw: (a) => rawPostgres(a as RecoverablePostgresStartBarrier),
    orphanNote: async (a, startId, digest, text) =>
      void (await (a as RecoverablePostgresStartBarrier).pool.query('INSERT INTO ql3.resolution_notes (start_id, note_digest, note_text) VALUES ($1, $2, $3)', [startId, digest, text])),
  });
});
