import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { expect } from 'chai';
import { build } from 'esbuild';
import { createDatabase, type TestDatabase } from '../../testkit/postgresHarness';
import { freshDir } from '../support/tmp';
import { allExamples, readmeExamples, uncheckedSnippets, userDocs } from './docExamples';

// R6.1: the package as a user gets it. `npm pack` (which runs `prepack`: a clean build), then
// consumer projects that install the tarball the way an application does, type-check the
// examples of README.md and docs/*.md (extracted from their text) with only @types/node and @types/pg added
// and `skipLibCheck: false`, and run the complete ones under CommonJS, ESM and an esbuild bundle on both
// backends. Installs are from the local tarball and npm's cache (`--prefer-offline`, the exact
// driver versions this repository pins); better-sqlite3's native binary is copied from this
// repository's install (same version, same Node) instead of downloaded, so the spec needs no
// network and takes seconds, not a native compile.

const ROOT = join(__dirname, '..', '..');
const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  devDependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
  dependencies: Record<string, string>;
  private?: boolean;
  license: string;
  files: string[];
  scripts: Record<string, string>;
};
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const NPM_FLAGS = ['--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel=error'];

/** npm may reach the registry: it gets back the CA bundle `npm test` keeps from the other child processes (scripts/test.mjs). */
const npmCa = (): NodeJS.ProcessEnv => (process.env.SB_NPM_EXTRA_CA_CERTS === undefined ? {} : { NODE_EXTRA_CA_CERTS: process.env.SB_NPM_EXTRA_CA_CERTS });

const sh = (command: string, args: readonly string[], cwd: string, env: NodeJS.ProcessEnv = {}): SpawnSyncReturns<string> =>
  spawnSync(command, args, { cwd, encoding: 'utf8', env: { ...process.env, ...(command === 'npm' ? npmCa() : {}), ...env }, maxBuffer: 64 * 1024 * 1024 });

const ok = (r: SpawnSyncReturns<string>, what: string): string => {
  expect(r.status, `${what} failed:\n${r.stdout}\n${r.stderr}`).to.equal(0);
  return r.stdout;
};

const npm = (args: readonly string[], cwd: string): string => ok(sh('npm', args, cwd), `npm ${args.join(' ')}`);

/** The examples the three README runs below check by their output. */
const OUTPUT_CHECKED = ['run-tool.mjs', 'crash-recover.mjs', 'sqlite.mts', 'postgres.cts', 'saga.mts'];

const tsconfig = (compilerOptions: Record<string, unknown>, files: readonly string[]) =>
  JSON.stringify({ compilerOptions: { strict: true, target: 'ES2022', skipLibCheck: false, noEmit: true, ...compilerOptions }, files }, null, 2);

const installSqliteBinary = (consumer: string): void => {
  const from = join(dirname(require.resolve('better-sqlite3/package.json', { paths: [ROOT] })), 'build', 'Release', 'better_sqlite3.node');
  const to = join(consumer, 'node_modules', 'better-sqlite3', 'build', 'Release');
  mkdirSync(to, { recursive: true });
  copyFileSync(from, join(to, 'better_sqlite3.node'));
};

describe('R6.1 the packed package in consumer projects (npm pack, CommonJS, ESM, esbuild)', function () {
  this.timeout(300_000);
  let tarball = '';
  let packed: readonly string[] = [];
  let consumer = '';
  let examples = new Map<string, string>();
  let runnable: string[] = [];
  let db: TestDatabase;
  let roles = '';
  const timings: string[] = [];
  const timed = <T>(label: string, body: () => T): T => {
    const t0 = Date.now();
    try {
      return body();
    } finally {
      timings.push(`${label} ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    }
  };

  before(async () => {
    const work = freshDir('sb-consumer');
    // Under `npm test` dist/ is the clean build scripts/test.mjs just made: prepack need not make it again.
    const prebuilt = process.env.SB_PREBUILT === '1' ? ['--ignore-scripts'] : [];
    const out = timed('npm pack (prepack: clean build)', () => npm(['pack', '--json', ...prebuilt, '--pack-destination', work, '--loglevel=error'], ROOT));
    const info = (JSON.parse(out.slice(out.indexOf('['))) as { filename: string; files: { path: string }[] }[])[0]!;
    tarball = join(work, info.filename);
    packed = info.files.map((f) => f.path);

    const found = allExamples(ROOT);
    examples = new Map([...found].map(([name, e]) => [name, e.source]));
    runnable = [...found].filter(([name, e]) => e.run && name.endsWith('ts') && !OUTPUT_CHECKED.includes(name)).map(([name]) => name);
    consumer = join(work, 'app');
    mkdirSync(consumer);
    writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer-app', private: true }));
    timed('consumer install (both drivers)', () =>
      // As a TypeScript user does: Node's types for node:crypto, and pg's for /postgres (an optional peer).
      npm(['install', ...NPM_FLAGS, tarball, `pg@${PKG.devDependencies.pg}`, `better-sqlite3@${PKG.devDependencies['better-sqlite3']}`, `@types/node@${PKG.devDependencies['@types/node']}`, `@types/pg@${PKG.devDependencies['@types/pg']}`], consumer),
    );
    installSqliteBinary(consumer);
    roles = examples.get('roles.sql') ?? '';
    examples.delete('roles.sql');
    for (const [name, source] of examples) writeFileSync(join(consumer, name), source);
    // An application's own migrations must never be applied by the library (bundled or not).
    for (const dialect of ['sqlite', 'postgres']) {
      mkdirSync(join(consumer, 'migrations', dialect), { recursive: true });
      writeFileSync(join(consumer, 'migrations', dialect, '0001-app.sql'), 'THIS IS THE APPLICATION OWN MIGRATION, NOT SQL;');
    }
    db = await createDatabase();
  });

  after(async () => {
    await db?.drop();
    console.log(`      timings: ${timings.join('; ')}`);
  });

  it('R6.1 R12.2 the README has a complete example per backend, the saga, and a tool call crashed and recovered from its sealed plan; ESM and CommonJS', () => {
    expect([...examples.keys()]).to.include.members(['run-tool.mjs', 'crash-recover.mjs', 'sqlite.mts', 'postgres.cts', 'saga.mts']);
    expect([...readmeExamples(readFileSync(join(ROOT, 'README.md'), 'utf8')).keys()]).to.include.members(['run-tool.mjs', 'crash-recover.mjs', 'postgres.cts']);
    expect(readFileSync(join(ROOT, 'README.md'), 'utf8').match(/^```\S+ example=(\S+)/m)?.[1], "the README's first example is the runTool call").to.equal('run-tool.mjs');
  });

  it('R6.1 every TypeScript snippet of README.md and docs/*.md is a checked example (```ts example=NAME)', () => {
    const unchecked = userDocs(ROOT).filter((d) => uncheckedSnippets(d.text) > 0).map((d) => `${d.name}: ${uncheckedSnippets(d.text)}`);
    expect(unchecked, 'mark each ```ts block example=NAME (check=types when it needs a live tool)').to.deep.equal([]);
    for (const name of examples.keys()) expect(name, 'an example is a .mts, .cts, .mjs (run as written) or .sql file').to.match(/\.(mts|cts|mjs|sql)$/);
  });

  it('R6.1 the tarball is publishable: built code, declarations, LICENSE and README; no source maps, no demo, no sources', () => {
    expect(PKG.private).to.equal(undefined);
    expect(PKG.license).to.equal('MIT');
    expect(PKG.scripts.prepack).to.match(/build/);
    expect(PKG.scripts.prepare, 'npm ci --omit=dev must not need tsc').to.equal(undefined);
    expect(packed).to.include.members(['LICENSE', 'README.md', 'package.json', 'dist/domain/index.js', 'dist/infrastructure/memory/testing.d.ts', 'dist/infrastructure/cli/main.js']);
    expect(packed.filter((p) => p.endsWith('.map') || p.includes('demo') || p.endsWith('.ts') && !p.endsWith('.d.ts'))).to.deep.equal([]);
    expect(packed.filter((p) => !p.startsWith('dist/') && !['LICENSE', 'README.md', 'package.json'].includes(p))).to.deep.equal([]);
  });

  it('R6.1 the drivers are optional peers, and every runtime dependency is loaded by the shipped code (or by emmett\'s entry)', () => {
    for (const driver of ['pg', 'better-sqlite3']) {
      expect(PKG.dependencies, driver).not.to.have.property(driver);
      expect(PKG.peerDependenciesMeta[driver]?.optional, driver).to.equal(true);
      expect(PKG.devDependencies, `${driver} stays a devDependency for the repository's own specs`).to.have.property(driver);
    }
    const shipped = packed.filter((p) => p.endsWith('.js')).map((p) => readFileSync(join(ROOT, p), 'utf8')).join('\n');
    const emmettEntry = readFileSync(require.resolve('@event-driven-io/emmett', { paths: [ROOT] }), 'utf8');
    const loaded = (name: string, text: string) => new RegExp(`require\\(["']${name.replace(/[/.]/g, (c) => `\\${c}`)}(/[^"']*)?["']\\)`).test(text);
    for (const dep of Object.keys(PKG.dependencies).filter((d) => !d.startsWith('@types/'))) {
      expect(loaded(dep, shipped) || loaded(dep, emmettEntry), `${dep} is a dependency nothing shipped loads`).to.equal(true);
    }
  });

  // One nodenext compile both type-checks the examples and emits what the run below executes
  // (tsc exits non-zero on any type error, emitted or not).
  let nodenext: SpawnSyncReturns<string> | undefined;
  const compileNodenext = (): SpawnSyncReturns<string> => {
    if (nodenext) return nodenext;
    writeFileSync(join(consumer, 'tsconfig.emit.json'), tsconfig({ module: 'nodenext', moduleResolution: 'nodenext', noEmit: false, outDir: 'out' }, [...examples.keys()].filter((n) => n.endsWith('ts'))));
    return (nodenext = timed('tsc nodenext (emits out/)', () => sh(process.execPath, [TSC, '-p', 'tsconfig.emit.json'], consumer)));
  };

  it('R6.1 the README examples type-check as nodenext (ESM .mts, CommonJS .cts), strict, skipLibCheck false, with only @types/node and @types/pg added', () => {
    ok(compileNodenext(), 'tsc nodenext');
  });

  it('R6.1 the CommonJS example type-checks as "module": "commonjs" (subpaths through typesVersions) and the ESM one as "bundler"', () => {
    const cjs = join(consumer, 'cjs');
    const bundler = join(consumer, 'bundler');
    mkdirSync(cjs);
    mkdirSync(bundler);
    writeFileSync(join(cjs, 'postgres.ts'), examples.get('postgres.cts')!);
    writeFileSync(join(cjs, 'tsconfig.json'), tsconfig({ module: 'commonjs', moduleResolution: 'node10', esModuleInterop: true }, ['postgres.ts']));
    writeFileSync(join(bundler, 'sqlite.ts'), examples.get('sqlite.mts')!);
    writeFileSync(join(bundler, 'saga.ts'), examples.get('saga.mts')!);
    writeFileSync(join(bundler, 'tsconfig.json'), tsconfig({ module: 'preserve', moduleResolution: 'bundler' }, ['sqlite.ts', 'saga.ts']));
    timed('tsc commonjs', () => ok(sh(process.execPath, [TSC, '-p', 'tsconfig.json'], cjs), 'tsc commonjs'));
    timed('tsc bundler', () => ok(sh(process.execPath, [TSC, '-p', 'tsconfig.json'], bundler), 'tsc bundler'));
  });

  it('R6.1 the README examples run as compiled ESM and CommonJS, on SQLite and on PostgreSQL', () => {
    ok(compileNodenext(), 'tsc emit');
    const env = { BARRIER_DB: join(consumer, 'examples.db'), DATABASE_URL: db.url };
    // The README's first example, as written: plain ESM JavaScript that Node runs without a build.
    const runTool = ok(sh(process.execPath, ['run-tool.mjs'], consumer, env), 'run-tool.mjs');
    expect(runTool).to.equal('completed {"day":"2026-12-07","orders":3}\ncompleted false\n0\n');
    // R12.2: killed after the start and its sealed plan committed, before the tool acted; the
    // redacted preview shows the allowlisted day, never the token; recover() re-drives it from
    // the stored plan: one side effect
    const crash = ok(sh(process.execPath, ['crash-recover.mjs'], consumer, env), 'crash-recover.mjs');
    expect(crash).to.equal('crashed: SIGKILL\nsealed redaction.allowlist.v1 {"day":"2026-12-07"}\ncompleted in doubt 0 side effects 1\n');
    expect(crash).to.not.contain('kept-in-the-sealed-plan');
    const sqlite = ok(sh(process.execPath, ['out/sqlite.mjs'], consumer, env), 'sqlite.mjs');
    expect(sqlite).to.match(/^created start-\S+\nexisting\n$/);
    const postgres = ok(sh(process.execPath, ['out/postgres.cjs'], consumer, env), 'postgres.cjs');
    expect(postgres).to.match(/^created start-\S+ \d+\nSEMANTIC_CONFLICT\n$/);
    const saga = ok(sh(process.execPath, ['out/saga.mjs'], consumer, env), 'saga.mjs');
    expect(saga).to.match(/^running the tool for start-\S+\ncompleted\nalready_resolved false\n$/);
    // The documents' other complete examples run too, against the stores the three above filled.
    for (const name of runnable) ok(sh(process.execPath, [`out/${name.replace(/\.mts$/, '.mjs').replace(/\.cts$/, '.cjs')}`], consumer, env), name);
  });

  it("R5.2 R6.1 the README's PostgreSQL setup: LOGIN roles in ql3_owner / ql3_runtime; the example runs as the migrator, the app role starts with migrate: false", async () => {
    // Role names are cluster-wide: this run's own, so parallel runs never share them.
    const suffix = db.name.slice(3, 11);
    const migrator = `barrier_migrator_${suffix}`;
    const app = `barrier_app_${suffix}`;
    const sql = roles.replace(/barrier_migrator/g, migrator).replace(/barrier_app/g, app);
    expect(sql).to.include('IN ROLE ql3_owner').and.include('IN ROLE ql3_runtime');
    await db.admin((c) => c.query(sql));
    try {
      const asRole = (role: string) => Object.assign(new URL(db.url), { username: role }).toString();
      const out = ok(sh(process.execPath, ['out/postgres.cjs'], consumer, { DATABASE_URL: asRole(migrator) }), `postgres.cjs as ${migrator}`);
      expect(out).to.match(/^created start-\S+ \d+\nSEMANTIC_CONFLICT\n$/);
      const probe = `
        const { openPostgresStartBarrier } = require('${PKG.name}/postgres');
        const { buildScenario } = require('${PKG.name}/testing');
        (async () => {
          const a = await openPostgresStartBarrier({ connectionString: process.env.DATABASE_URL, migrate: false });
          try {
            const s = buildScenario();
            for (const c of s.lifecycle) await a.runs.handle(c);
            console.log((await a.barriers.prepare(s.startCommand())).outcome);
          } finally { await a.close(); }
        })().catch((e) => { console.error(e); process.exitCode = 1; });`;
      expect(ok(sh(process.execPath, ['-e', probe], consumer, { DATABASE_URL: asRole(app) }), `start as ${app}`)).to.equal('created\n');
    } finally {
      await db.admin((c) => c.query(`DROP ROLE IF EXISTS ${migrator}; DROP ROLE IF EXISTS ${app}`));
    }
  });

  it('R6.1 esbuild bundles of the examples run on both backends (ESM and CommonJS output), with the SQL inside the bundle', async () => {
    const common = { bundle: true, platform: 'node' as const, external: ['better-sqlite3', 'pg-native'], logLevel: 'silent' as const, absWorkingDir: consumer };
    await build({
      ...common,
      entryPoints: ['sqlite.mts'],
      format: 'esm',
      outfile: 'bundle/sqlite.mjs',
      banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
    });
    await build({ ...common, entryPoints: ['postgres.cts'], format: 'cjs', outfile: 'bundle/postgres.cjs' });
    // Fresh databases: the bundle must migrate them from its own embedded SQL.
    const other = await createDatabase();
    try {
      const env = { BARRIER_DB: join(consumer, 'bundle.db'), DATABASE_URL: other.url };
      expect(ok(sh(process.execPath, ['bundle/sqlite.mjs'], consumer, env), 'bundled sqlite.mjs')).to.match(/^created start-\S+\nexisting\n$/);
      expect(ok(sh(process.execPath, ['bundle/postgres.cjs'], consumer, env), 'bundled postgres.cjs')).to.match(/^created start-\S+ \d+\nSEMANTIC_CONFLICT\n$/);
    } finally {
      await other.drop();
    }
  });

  it('R6.1 a PostgreSQL-only consumer installs no better-sqlite3, /sqlite names the missing driver, and its qinglong-barrier runs on PostgreSQL', () => {
    const pgOnly = join(dirname(consumer), 'pg-only');
    mkdirSync(pgOnly);
    writeFileSync(join(pgOnly, 'package.json'), JSON.stringify({ name: 'pg-only-app', private: true }));
    timed('consumer install (pg only)', () => npm(['install', ...NPM_FLAGS, tarball, `pg@${PKG.devDependencies.pg}`], pgOnly));
    expect(existsSync(join(pgOnly, 'node_modules', 'better-sqlite3'))).to.equal(false);
    const ls = sh('npm', ['ls', '--omit=dev'], pgOnly);
    expect(ls.stdout).to.include(PKG.name);
    expect(ls.stdout).not.to.include('better-sqlite3');
    // The whole tree: nothing of better-sqlite3 installed, not even its @types; npm only notes
    // the optional peer it did not install.
    const all = sh('npm', ['ls', '--omit=dev', '--all'], pgOnly).stdout.split('\n').filter((l) => l.includes('better-sqlite3'));
    expect(all.every((l) => l.includes('UNMET OPTIONAL DEPENDENCY')), all.join('\n')).to.equal(true);
    expect(existsSync(join(pgOnly, 'node_modules', '@types', 'better-sqlite3'))).to.equal(false);
    const probe = `
      const { openSqliteStartBarrier } = require('${PKG.name}/sqlite');
      openSqliteStartBarrier({ path: 'x.db' }).then(
        () => console.log('opened'),
        (e) => console.log(JSON.stringify({ name: e.name, code: e.code, driver: e.driver })));`;
    const r = ok(sh(process.execPath, ['-e', probe], pgOnly), 'probe');
    expect(JSON.parse(r)).to.deep.equal({ name: 'DriverMissingError', code: 'DRIVER_MISSING', driver: 'better-sqlite3' });
    // The CLI as `npx qinglong-barrier` runs it from the install: on PostgreSQL, without better-sqlite3.
    const bin = join(pgOnly, 'node_modules', '.bin', 'qinglong-barrier');
    expect(ok(sh(bin, ['--version'], pgOnly), 'qinglong-barrier --version').trim()).to.match(/^\d+\.\d+\.\d+/);
    const badUrl = sh(bin, ['--postgres', 'notaurl', 'in-doubt'], pgOnly);
    expect([badUrl.status, badUrl.stderr]).to.deep.equal([2, 'qinglong-barrier: CONNECTION_FAILED: not a PostgreSQL connection string: "notaurl" (expected postgres://USER@HOST:PORT/DATABASE)\n']);
    // The README examples ran against this database before: their starts are listed, verified.
    const inDoubt = JSON.parse(ok(sh(bin, ['--postgres', db.url, 'in-doubt'], pgOnly), 'qinglong-barrier in-doubt')) as { startId: string }[];
    expect(inDoubt.every((s) => s.startId.startsWith('start-'))).to.equal(true);
  });

  it('R6.1 npm ci --omit=dev from a checkout installs without building (no prepare step, no native module)', () => {
    const checkout = join(dirname(consumer), 'checkout');
    mkdirSync(checkout);
    for (const f of ['package.json', 'package-lock.json']) copyFileSync(join(ROOT, f), join(checkout, f));
    timed('npm ci --omit=dev', () => ok(sh('npm', ['ci', '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], checkout), 'npm ci --omit=dev'));
    expect(existsSync(join(checkout, 'node_modules', 'better-sqlite3'))).to.equal(false);
    expect(existsSync(join(checkout, 'node_modules', '@event-driven-io', 'emmett'))).to.equal(true);
  });
});
