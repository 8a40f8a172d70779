import { expect } from 'chai';
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';

// The layers as folders (design card, version two): domain (pure) -> application (API types,
// protocols, recovery rules, saga) -> infrastructure (adapters and the CLI only); projections
// depend on domain and application only.

const ROOT = join(__dirname, '..', '..');
const sources = (dir: string): string[] =>
  readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((f) => f.isFile() && f.name.endsWith('.ts'))
    .map((f) => join(f.parentPath ?? (f as unknown as { path: string }).path, f.name));
const importsOf = (file: string): string[] => [...readFileSync(file, 'utf8').matchAll(/from '([^']+)'/g)].map((m) => m[1]!);
/** The top-level folder a relative import of `file` lands in, or the package name. */
const targetOf = (file: string, spec: string): string => (spec.startsWith('.') ? relative(ROOT, join(file, '..', spec)).split('/')[0]! : spec);

describe('Layers as folders (no behaviour: the shape of the source tree)', () => {
  it('R6.1 application/ imports domain/, projections/ and libraries, never infrastructure/ or a driver', () => {
    for (const file of sources('application')) {
      for (const spec of importsOf(file)) {
        expect(['infrastructure', 'pg', 'better-sqlite3'], `${relative(ROOT, file)} imports ${spec}`).to.not.include(targetOf(file, spec));
      }
    }
  });

  it('R6.1 projections/ depend on domain/ and application/ only (and pure libraries)', () => {
    for (const file of sources('projections')) {
      for (const spec of importsOf(file)) {
        const target = targetOf(file, spec);
        expect(['infrastructure', 'pg', 'better-sqlite3', 'specs', 'reliability'], `${relative(ROOT, file)} imports ${spec}`).to.not.include(target);
      }
    }
  });

  it('infrastructure/ holds only the adapters, the CLI and the migration runner; no file there is much over 300 lines', () => {
    const entries = readdirSync(join(ROOT, 'infrastructure')).sort();
    expect(entries.filter((e) => e !== 'migrationsSql.generated.ts')).to.deep.equal(['adapters', 'cli', 'memory', 'migrations.ts', 'postgres', 'sqlite']);
    // schemaObjects.made.ts is data a script writes (one line per catalog object), not code
    for (const file of sources('infrastructure').filter((f) => !f.endsWith('.made.ts'))) {
      const lines = readFileSync(file, 'utf8').split('\n').length;
      expect(lines, relative(ROOT, file)).to.be.at.most(320);
    }
  });

  it('no two production files share a name, so a file says what it is for', () => {
    const names = ['application', 'infrastructure', 'projections'].flatMap(sources).map((f) => f.split('/').pop()!);
    const shared = ['index.ts', 'sql.ts', 'identities.ts', 'errors.ts', 'reads.ts', 'migrate.ts'];
    const repeated = names.filter((n, i) => names.indexOf(n) !== i && !shared.includes(n));
    expect([...new Set(repeated)]).to.deep.equal([]);
  });

  it('comments in the storage code say why, not when: no issue numbers', () => {
    for (const file of [...sources('application'), ...sources('projections'), ...sources('infrastructure/memory'), ...sources('infrastructure/sqlite'), ...sources('infrastructure/postgres')]) {
      expect(readFileSync(file, 'utf8'), relative(ROOT, file)).to.not.match(/\bissue \d+/i);
    }
  });
});
