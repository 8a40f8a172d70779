import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { ROOT, buildOnce } from './cliSuite';

// R6.1 docs/cli.md's reference is the built CLI's own `--help` (scripts/cliReference.mjs, run as
// `npm run docs:cli`): this fails whenever a command, option or description changed and the
// document was not written again, so the reference a user reads is the CLI they run.

describe('R6.1 docs/cli.md is what the CLI says (npm run docs:cli)', function () {
  this.timeout(120_000);
  before(() => buildOnce());

  it('R6.1 docs/cli.md holds exactly what scripts/cliReference.mjs writes from --help now', () => {
    const r = spawnSync(process.execPath, [join(ROOT, 'scripts', 'cliReference.mjs'), '--check'], { cwd: ROOT, encoding: 'utf8' });
    expect(r.status, `${r.stdout}${r.stderr}`).to.equal(0);
  });

  it('R6.1 the reference has the program and every command, migrate --print-sql and inspect included', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'cli.md'), 'utf8');
    for (const command of ['example', 'apply', 'prepare', 'show', 'history', 'in-doubt', 'inspect', 'resolve', 'note', 'purge-note', 'migrate', 'retry', 'verify']) {
      expect(doc, command).to.include(`### qinglong-barrier ${command} --help`);
    }
    expect(doc).to.include('--print-sql');
  });
});
