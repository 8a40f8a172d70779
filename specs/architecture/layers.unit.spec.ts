import { expect } from 'chai';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import ts from 'typescript';

// The layers as folders, in a strict order: domain (pure) <- projections (rows derived from the
// log) <- application (API types, protocols, checks, recovery rules, saga) <- infrastructure
// (adapters and the CLI only). A file imports its own layer or one below it, never above, and
// no production file reaches itself through its imports (type-only imports count: they are
// what made projections import upward).

const ROOT = join(__dirname, '..', '..');
const LAYERS = ['domain', 'projections', 'application', 'infrastructure'] as const;
const sources = (dir: string): string[] =>
  readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((f) => f.isFile() && f.name.endsWith('.ts'))
    .map((f) => join(f.parentPath ?? (f as unknown as { path: string }).path, f.name));
const production = LAYERS.flatMap(sources).filter((f) => !f.endsWith('.generated.ts'));
const rel = (file: string) => relative(ROOT, file);
/** Every module a file names (imports, re-exports, `import()` types), as written. */
const importsOf = (file: string): string[] => ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles.map((f) => f.fileName);
/** The file a relative import resolves to, or undefined (a package). */
const resolved = (file: string, spec: string): string | undefined => {
  if (!spec.startsWith('.')) return undefined;
  const base = join(dirname(file), spec);
  return [`${base}.ts`, join(base, 'index.ts'), base].find((c) => c.endsWith('.ts') && existsSync(c));
};
const layerOf = (file: string): number => LAYERS.indexOf(rel(file).split('/')[0] as (typeof LAYERS)[number]);

/** Function-like nodes of a file longer than `max` lines (a closure's nested functions count within it too). */
const longFunctions = (file: string, max: number): { where: string; lines: number }[] => {
  const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
  const found: { where: string; lines: number }[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && (node as ts.FunctionLikeDeclaration).body !== undefined) {
      const first = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const lines = sf.getLineAndCharacterOfPosition(node.end).line - first + 1;
      if (lines > max) found.push({ where: `${rel(file)}:${first + 1}`, lines });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
};

describe('Layers as folders (no behaviour: the shape of the source tree)', () => {
  it('R6.1 each layer imports only itself and the layers below it: domain <- projections <- application <- infrastructure', () => {
    const upward: string[] = [];
    for (const file of production) {
      for (const spec of importsOf(file)) {
        const target = resolved(file, spec);
        if (target !== undefined && layerOf(target) > layerOf(file)) upward.push(`${rel(file)} imports ${spec}`);
      }
    }
    expect(upward).to.deep.equal([]);
  });

  it('R6.1 only infrastructure/ reaches a driver (pg, better-sqlite3, the MCP SDK)', () => {
    const drivers = /^(pg|better-sqlite3|@modelcontextprotocol\/sdk)(\/|$)/;
    for (const file of production.filter((f) => layerOf(f) < LAYERS.indexOf('infrastructure'))) {
      for (const spec of importsOf(file)) expect(spec, `${rel(file)} imports ${spec}`).to.not.match(drivers);
      for (const spec of importsOf(file)) expect(spec, `${rel(file)} imports ${spec}`).to.not.match(/^\.\.?\/.*(specs|testkit|reliability|bench)\//);
    }
  });

  it('R6.1 no import cycle among the production files', () => {
    const graph = new Map(production.map((f) => [f, importsOf(f).map((s) => resolved(f, s)).filter((t): t is string => t !== undefined)]));
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const path: string[] = [];
    const visit = (f: string): void => {
      state.set(f, 'open');
      path.push(f);
      for (const next of graph.get(f) ?? []) {
        if (state.get(next) === 'open') cycles.push([...path.slice(path.indexOf(next)), next].map(rel).join(' -> '));
        else if (!state.has(next)) visit(next);
      }
      path.pop();
      state.set(f, 'done');
    };
    for (const f of production) if (!state.has(f)) visit(f);
    expect(cycles).to.deep.equal([]);
  });

  it('projections/ holds the projections only (rows derived from the log; checks live in application/checks)', () => {
    const files = sources('projections').map((f) => relative(join(ROOT, 'projections'), f)).sort();
    expect(files).to.deep.equal(['outcomeRows.ts', 'rebuild.ts', 'rows.ts', 'runState.ts', 'startRows.ts', 'tableRows.ts']);
  });

  it('no file in application/ or projections/ is over 300 lines, and no function there over 80', () => {
    for (const file of [...sources('application'), ...sources('projections')]) {
      const lines = readFileSync(file, 'utf8').split('\n').length;
      expect(lines, rel(file)).to.be.at.most(300);
      expect(longFunctions(file, 80), rel(file)).to.deep.equal([]);
    }
  });

  it('infrastructure/ holds only the adapters, the CLI and the migration runner; no file there is much over 300 lines', () => {
    const entries = readdirSync(join(ROOT, 'infrastructure')).sort();
    expect(entries.filter((e) => e !== 'migrationsSql.generated.ts')).to.deep.equal(['adapters', 'cli', 'memory', 'migrations.ts', 'postgres', 'sqlite']);
    // schemaObjects.made.ts is data a script writes (one line per catalog object), not code
    for (const file of sources('infrastructure').filter((f) => !f.endsWith('.made.ts'))) {
      const lines = readFileSync(file, 'utf8').split('\n').length;
      expect(lines, rel(file)).to.be.at.most(320);
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
      expect(readFileSync(file, 'utf8'), rel(file)).to.not.match(/\bissue \d+/i);
    }
  });
});
