import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freshDir } from '../support/tmp';
import { spawnTsxWorker } from '../../testkit/workerProcess';

/**
 * Runs `npm run reliability -- --short --only <phases> [--backends <backends>]` as its own process (specs never import
 * the harness) and reads its JSON report back. The counts it prints go to the test log; a run
 * killed by a signal, or one that ends without a report, fails with the harness's own stderr.
 */
export const runShortHarness = async <R>(phases: string, tag: string, backends?: string): Promise<{ report: R; printed: string }> => {
  const json = join(freshDir(tag), 'report.json');
  const only = backends === undefined ? [] : ['--backends', backends];
  const run = spawnTsxWorker(join(__dirname, '..', '..', 'reliability', 'run.ts'), ['--short', '--only', phases, ...only, '--json', json, '--no-docs']);
  const exit = await run.exited;
  const printed = run.lines.join('\n');
  console.log(printed.replace(/^/gm, '      '));
  expect(exit.signal, run.stderr()).to.equal(null);
  expect(existsSync(json), `the harness exited ${String(exit.code)} without a report: ${run.stderr().slice(-4000)}`).to.equal(true);
  return { report: JSON.parse(readFileSync(json, 'utf8')) as R, printed };
};
