import { createDatabase, openOn, type TestDatabase } from '../../testkit/postgresHarness';
import { planKeyringSuite } from './planKeyringSuite';

// R12.2 on PostgreSQL: the CLI's plan keyring works on `--postgres` as on `--db` (the same
// suite): show, inspect, in-doubt and verify open the sealed plan with the key and print its
// redacted preview, never its input or a key; a plan that does not open fails closed (exit 5).

let db: TestDatabase | undefined;
planKeyringSuite('R12.2 the CLI plan keyring on PostgreSQL: the sealed plan\'s preview, never the plan or the key', 'plan-keyring-pg', {
  open: async (_dir, plans) => openOn((db = await createDatabase()), { plans }),
  target: () => ['--postgres', db!.url],
  drop: async () => db?.drop(),
});
