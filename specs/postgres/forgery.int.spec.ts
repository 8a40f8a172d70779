import { FORGERIES } from '../../testkit/forgery';
import { postgresForgeryTarget } from '../../testkit/forgeryTargets';
import { createDatabase, type TestDatabase } from '../../testkit/postgresHarness';
import { forgerySuite } from '../conformance/forgeryConformance';

// R9.1: as ql3_runtime (the credentials a runtime replica holds, migrate: false), the database
// itself refuses every forgery: no grant to rewrite a head, and the event trigger for the rest.
describe('R9.1 forgeries with the runtime role on PostgreSQL: every one refused by the database', function () {
  this.timeout(120_000);
  const dbs: TestDatabase[] = [];
  after(async () => {
    for (const db of dbs) await db.drop();
  });
  forgerySuite(
    async () => {
      const [target, source] = [await createDatabase(), await createDatabase()];
      dbs.push(target, source);
      return postgresForgeryTarget(target.url, source.url);
    },
    Object.fromEntries(FORGERIES.map((f) => [f.name, 'refused'])),
  );
});
