import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { ADAPTER_NAMES } from '../../testkit/adapters/fixtures';
import { spawnTsxWorker } from '../../testkit/workerProcess';
import { freshDir } from '../support/tmp';

// The short form of the adapters phase of `npm run reliability` (R11.4) inside `npm test`: one
// trial of each fault for each real adapter (process, HTTP, MCP over streamable HTTP and over
// stdio, and an HTTP tool with neither status endpoint nor idempotency), on SQLite and
// PostgreSQL, against tools on 127.0.0.1 and child processes this run starts. Counts only, no
// timed assertions; every wait in the harness is bounded.

/** The faults of the phase: lost response, saga killed, hang past timeout, connection reset, racing drivers. */
const SCENARIOS = 5;

interface AdapterCount {
  backend: string;
  adapter: string;
  scenario: string;
  trials: number;
  sideEffects: number;
  duplicates: number;
  unrecorded: number;
  outcomesRecorded: number;
  inDoubtAfterFault: number;
  listedInDoubt: number;
  resolvedByInspect: number;
  resolvedByRestart: number;
  leftInDoubt: number;
}
interface PromiseCount {
  backend: string;
  promise: string;
  trials: number;
  actedAfterTimeout: number;
  crossOriginRequests: number;
  environmentLeaks: number;
  recordedSucceeded: number;
  refused: number;
}
interface AdaptersReport {
  adapters: { backend: string; counts: AdapterCount[]; promises: PromiseCount[]; failures: string[] }[];
}

describe('R11.4: adapters under faults, short form of the reliability phase', function () {
  this.timeout(600_000);
  let report: AdaptersReport;
  let printed: string;

  before(async () => {
    // The harness runs as `npm run reliability` would (specs never import it): its JSON report is read back.
    const json = join(freshDir('reliability-adapters'), 'report.json');
    const run = spawnTsxWorker(join(__dirname, '..', '..', 'reliability', 'run.ts'), ['--short', '--only', 'adapters', '--json', json, '--no-docs']);
    const exit = await run.exited;
    printed = run.lines.join('\n');
    console.log(printed.replace(/^/gm, '      '));
    expect(exit.signal, run.stderr()).to.equal(null);
    // no report: the harness itself failed; its stderr says why
    expect(existsSync(json), `the harness exited ${String(exit.code)} without a report: ${run.stderr().slice(-4000)}`).to.equal(true);
    report = JSON.parse(readFileSync(json, 'utf8')) as AdaptersReport;
  });

  it('R11.2/R11.4: every fault was run for every adapter on SQLite and PostgreSQL, and the harness saw no failure', () => {
    expect(report.adapters.map((a) => a.backend)).to.deep.equal(['sqlite', 'postgres']);
    for (const a of report.adapters) {
      expect(a.counts).to.have.length(ADAPTER_NAMES.length * SCENARIOS);
      expect(a.failures, a.backend).to.deep.equal([]);
    }
  });

  it('R11.2: 0 duplicate side effects and 0 unrecorded ones; every attempt left uncertain by a fault is listed by in-doubt', () => {
    for (const c of report.adapters.flatMap((a) => a.counts)) {
      const where = `${c.backend} ${c.adapter} ${c.scenario}`;
      expect(c.duplicates, where).to.equal(0);
      expect(c.unrecorded, where).to.equal(0);
      expect(c.listedInDoubt, where).to.equal(c.inDoubtAfterFault);
      expect(c.outcomesRecorded + c.leftInDoubt, where).to.equal(c.trials);
    }
  });

  it('R11.2: adapters with inspect resolve every uncertain attempt (by inspect, or a restart after not_started); without inspect or idempotency it stays in doubt', () => {
    for (const c of report.adapters.flatMap((a) => a.counts)) {
      const where = `${c.backend} ${c.adapter} ${c.scenario}`;
      if (c.adapter === 'http-plain') {
        if (c.inDoubtAfterFault > 0) expect(c.leftInDoubt, where).to.equal(c.inDoubtAfterFault);
      } else {
        expect(c.leftInDoubt, where).to.equal(0);
        expect(c.resolvedByInspect + c.resolvedByRestart, where).to.equal(c.inDoubtAfterFault);
      }
      if (c.scenario === 'lost_response') expect(c.sideEffects, where).to.equal(c.trials);
      if (c.scenario === 'racing_drivers') expect(c.sideEffects, where).to.equal(c.trials);
    }
  });

  it('R12.3: a setsid tool past its timeout, a redirecting HTTP tool and an environment probe on each backend: 0 actions after the timeout, 0 cross-origin requests, 0 recorded as success, 0 environment leaks; the table is printed', () => {
    for (const a of report.adapters) {
      expect(a.promises.map((p) => p.promise), a.backend).to.deep.equal(['setsid_past_timeout', 'redirecting_http', 'environment_probe']);
      for (const p of a.promises) {
        const where = `${p.backend} ${p.promise}`;
        expect(p.trials, where).to.be.greaterThan(0);
        expect([p.actedAfterTimeout, p.crossOriginRequests, p.environmentLeaks, p.recordedSucceeded], where).to.deep.equal([0, 0, 0, 0]);
      }
    }
    expect(printed).to.contain('Adapters keep what they declare (R12.3)');
    expect(printed).to.match(/sqlite setsid tool past its timeout +1 +0 /);
    expect(printed).to.match(/postgres redirecting HTTP tool \(307\) +1 +- +0 +- +0/);
  });
});
