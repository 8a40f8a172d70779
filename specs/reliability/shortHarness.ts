import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freshDir } from '../support/tmp';
import { spawnTsxWorker } from '../../testkit/workerProcess';

/**
 * Runs `npm run reliability -- --short --only <phases> [--backends <backends>]` as its own
 * process (specs never import the harness) and reads its JSON report back. The counts it prints
 * go to the test log; a run killed by a signal, or one that ends without a report, fails with
 * the harness's own stderr.
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

/**
 * Several short harness runs side by side (their phases mostly wait on servers, leases and
 * child processes), read back as one report: each phase's rows in the order of `parts`, `ok`
 * only when every run was, the rest from the first run that has it.
 */
export const runShortHarnesses = async <R>(parts: readonly { readonly phases: string; readonly backends?: string }[], tag: string): Promise<{ report: R; printed: string }> => {
  const runs = await Promise.all(parts.map((p, i) => runShortHarness<Record<string, unknown>>(p.phases, `${tag}-${i}`, p.backends)));
  const report: Record<string, unknown> = {};
  for (const { report: r } of runs) {
    for (const [key, value] of Object.entries(r)) {
      const had = report[key];
      if (key === 'ok') report.ok = (had ?? true) === true && value === true;
      else if (Array.isArray(value)) report[key] = [...((had as unknown[] | undefined) ?? []), ...value];
      else if (key === 'durationMs') report[key] = { ...(had as object | undefined), ...(value as object) };
      else if (had === undefined) report[key] = value;
    }
  }
  return { report: report as R, printed: runs.map((r) => r.printed).join('\n') };
};
