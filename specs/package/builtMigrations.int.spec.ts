import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { DIALECTS, ROOT, onDisk } from '../support/migrationFiles';

// The built package carries the SQL of migrations/ (the build writes it into the code): a
// stale dist/ fails here. In the int tier, which runs after `npm test` has compiled.

describe('R6.1 migrations embedded in the built package', () => {
  for (const dialect of DIALECTS) {
    it(`R6.1 the built package (dist) embeds the current ${dialect} migrations (a stale build fails here)`, function () {
      const built = join(ROOT, 'dist', 'infrastructure', 'migrationsSql.generated.js');
      if (!existsSync(built)) this.skip(); // no build yet: `npm test` builds before it runs the specs
      const { EMBEDDED_MIGRATIONS } = require(built) as { EMBEDDED_MIGRATIONS: Record<string, { name: string; sql: string }[]> };
      expect(EMBEDDED_MIGRATIONS[dialect]).to.deep.equal(onDisk(dialect));
    });
  }
});
