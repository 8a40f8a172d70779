import { postgresDamageSession } from '../../testkit/damage';
import { createDatabase, openOn } from '../../testkit/postgresHarness';
import { damageSuite } from '../conformance/damageConformance';

damageSuite({
  name: 'PostgreSQL',
  chained: true,
  replayIndex: false,
  // CHECK constraints hold even with triggers and foreign keys off
  guarded: ['step_run_mutations.to_status', 'step_run_mutations.from_version', 'step_run_mutations.to_version'],
  open: async (seed) => {
    const db = await createDatabase();
    const authority = await openOn(db);
    await seed(authority);
    const damage = await postgresDamageSession(db.url);
    return {
      authority,
      damage,
      cli: ['--postgres', db.url],
      close: async () => {
        await damage.close();
        await authority.close();
        await db.drop();
      },
    };
  },
});
