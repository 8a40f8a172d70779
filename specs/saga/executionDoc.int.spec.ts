import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { freshDir } from '../support/tmp';

// docs/execution.md's tool call (R12.1, R12.2, R12.4) stays runnable: its `ts example=` block,
// with the package's subpaths mapped to the source files, run as it is written.

const ROOT = join(__dirname, '..', '..');
const SUBPATHS: Record<string, string> = {
  "'@qinglong/start-barrier'": join(ROOT, 'domain', 'index'),
  "'@qinglong/start-barrier/sqlite'": join(ROOT, 'infrastructure', 'sqlite', 'index'),
  "'@qinglong/start-barrier/saga'": join(ROOT, 'application', 'saga'),
};

describe('R12 docs/execution.md: one tool call sealed, previewed, crashed and recovered', function () {
  this.timeout(120_000);
  it('R12.2 the example runs: the crash leaves a sealed plan whose preview shows only the named field; a new process resumes it from the stored plan alone (one side effect); a shredded plan leaves verify green', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'execution.md'), 'utf8');
    const block = /^```ts example=execution\.mts\n([\s\S]*?)^```$/m.exec(doc)?.[1];
    expect(block, 'the example block').to.be.a('string');
    let source = block!;
    for (const [from, to] of Object.entries(SUBPATHS)) source = source.split(from).join(JSON.stringify(to));
    const dir = freshDir('execution-doc');
    writeFileSync(join(dir, 'execution.ts'), source);
    const run = spawnSync(process.execPath, ['--require', 'tsx/cjs', join(dir, 'execution.ts')], { cwd: ROOT, encoding: 'utf8', timeout: 110_000, env: { ...process.env, BARRIER_DB: join(dir, 'barrier.db') } });
    expect(run.status, run.stderr).to.equal(0);
    const lines = run.stdout.trim().split('\n');
    expect(lines[0]).to.equal('crashed: killed after the plan was sealed');
    expect(lines[1]).to.equal('plan sealed preview {"query":"orders of today"}');
    expect(lines[2]).to.match(/^tool ran for start-\S+ attempt 3 with query orders of today$/);
    expect(lines.slice(3)).to.deep.equal(['completed side effects 1', 'already_resolved side effects 1', 'verify true {"sealed":0,"shredded":1}']);
    expect(run.stdout + run.stderr).to.not.contain('tok-never-in-a-preview');
  });
});
