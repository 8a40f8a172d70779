import { openPostgresStartBarrier } from '../../infrastructure/postgres';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { TEST_PLANS } from '../../testkit/planKeys';
import type { MigratedTemplate } from '../../testkit/postgresHarness';
import { freshDbPath } from './tmp';

// The fresh keyed store a backend's conformance suites open per spec: a new SQLite file or a
// database cloned from the migrated template, an authority on it with the test plan keyring (so
// it may execute), and the CLI arguments that name it. Closing it closes the authority (and
// drops the database). Stores without a plan keyring: specs/sqlite/support.ts, testkit.

/** A fresh SQLite file named by `tag`. */
export const openKeyedSqlite = async (tag: string) => {
  const path = freshDbPath(tag);
  const authority = await openSqliteStartBarrier({ path, plans: TEST_PLANS });
  return { authority, path, cliArgs: ['--db', path], close: () => authority.close() };
};

/** A fresh database cloned from `template`. */
export const openKeyedPostgres = async (template: MigratedTemplate) => {
  const db = await template.clone();
  const authority = await openPostgresStartBarrier({ connectionString: db.url, plans: TEST_PLANS });
  return {
    authority,
    db,
    cliArgs: ['--postgres', db.url],
    close: async () => {
      await authority.close();
      await db.drop();
    },
  };
};
