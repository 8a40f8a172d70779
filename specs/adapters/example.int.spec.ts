import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { expect } from 'chai';

// The README's runnable example (reliability/adapters/example.ts) stays runnable: one tool call
// through barrier, adapter and outcome with each real adapter, and a replay that changes nothing.

describe('R11.4: the README example drives one tool call per adapter', function () {
  this.timeout(120_000);
  it('R11.4: process, HTTP, MCP over streamable HTTP and over stdio: completed, one side effect each, replay already_resolved', () => {
    const root = join(__dirname, '..', '..');
    const run = spawnSync(process.execPath, ['--require', 'tsx/cjs', join(root, 'reliability', 'adapters', 'example.ts')], { cwd: root, encoding: 'utf8', timeout: 110_000 });
    expect(run.status, run.stderr).to.equal(0);
    expect(run.stdout.match(/created -> completed; tool side effects 1;/g)).to.have.length(4);
    expect(run.stdout.match(/replay -> already_resolved; tool side effects still 1/g)).to.have.length(4);
  });
});
