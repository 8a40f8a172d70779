import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { freshDir } from '../support/tmp';
import { CLI, ROOT, buildOnce } from './cliSuite';

// A CLI process is short: each command loads the code it uses and no other (backend.ts,
// adapterRegistry.ts, verifyBar.ts). A preload records every module the built bin loaded.

const PG = ['/node_modules/pg/', '/infrastructure/postgres/'];
const SQLITE = ['/node_modules/better-sqlite3/', '/infrastructure/sqlite/'];
const ADAPTERS = ['/infrastructure/adapters/', '/node_modules/@modelcontextprotocol/', '/node_modules/cli-progress/'];

/** Every module file the built CLI loaded for `args`, whatever its exit. */
const loadedBy = (args: readonly string[]): string[] => {
  const dir = freshDir('cli-loading');
  const out = join(dir, 'loaded.json');
  const hook = join(dir, 'hook.js');
  writeFileSync(hook, `process.on('exit', () => require('fs').writeFileSync(${JSON.stringify(out)}, JSON.stringify(Object.keys(require.cache))));`);
  const r = spawnSync(process.execPath, ['-r', hook, CLI, ...args], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  expect(r.signal, r.stderr).to.equal(null);
  return (JSON.parse(readFileSync(out, 'utf8')) as string[]).map((f) => f.replace(/\\/g, '/'));
};

const among = (loaded: readonly string[], parts: readonly string[]): string[] => loaded.filter((f) => parts.some((p) => f.includes(p)));

describe('R6.1 the CLI loads what a command uses', function () {
  this.timeout(120_000);
  before(() => buildOnce());

  it('R6.1 --help loads no driver, backend, adapter or progress bar code', () => {
    const loaded = loadedBy(['--help']);
    expect(loaded.some((f) => f.endsWith('/infrastructure/cli/main.js')), 'the bin itself').to.equal(true);
    expect(among(loaded, [...PG, ...SQLITE, ...ADAPTERS])).to.deep.equal([]);
  });

  it('R6.1 a SQLite command loads no PostgreSQL code, no adapter and no progress bar', () => {
    const loaded = loadedBy(['--db', join(freshDir('cli-loading-db'), 'barrier.db'), 'migrate']);
    expect(among(loaded, SQLITE).length, 'the SQLite backend').to.be.greaterThan(0);
    expect(among(loaded, [...PG, ...ADAPTERS])).to.deep.equal([]);
  });

  it('R6.1 a PostgreSQL command loads no SQLite code, no adapter and no progress bar', () => {
    // nothing listens on port 1: the command fails to connect, after loading what it uses
    const loaded = loadedBy(['--postgres', 'postgres://postgres@127.0.0.1:1/none', 'in-doubt']);
    expect(among(loaded, PG).length, 'the PostgreSQL backend').to.be.greaterThan(0);
    expect(among(loaded, [...SQLITE, ...ADAPTERS])).to.deep.equal([]);
  });
});
