import { expect } from 'chai';
import { ADAPTER_NAMES } from '../../testkit/adapters/fixtures';
import { runShortHarnesses } from './shortHarness';

// The short form of the adapters phase of `npm run reliability` (R11.4) inside `npm test`: one
// trial of each fault for each real adapter (process, HTTP, MCP over streamable HTTP and over
// stdio, and an HTTP tool with neither status endpoint nor idempotency), on SQLite and
// PostgreSQL, against tools on 127.0.0.1 and child processes this run starts. Counts only, no
// timed assertions; every wait in the harness is bounded.

/** The faults of the phase: lost response, saga killed, hang past timeout, connection reset, racing drivers, killed after the seal. */
const SCENARIOS = 6;

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
interface ForgeryCount {
  backend: string;
  adapter: string;
  tried: number;
  refused: number;
  sideEffects: number;
}
interface AdaptersReport {
  adapters: { backend: string; counts: AdapterCount[]; promises: PromiseCount[]; forgeries: ForgeryCount[]; failures: string[] }[];
}

describe('R11.4: adapters under faults, short form of the reliability phase', function () {
  this.timeout(1_200_000); // under the harness's own 12-minute bound (reliability/run.ts)
  let report: AdaptersReport;
  let printed: string;

  before(async () => {
    // one harness per backend, side by side: the phase mostly waits (leases, timeouts, tools)
    ({ report, printed } = await runShortHarnesses<AdaptersReport>([{ phases: 'adapters', backends: 'sqlite' }, { phases: 'adapters', backends: 'postgres' }], 'reliability-adapters'));
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
      // killed after the seal, before any claim: no driver may have acted, so even http-plain re-drives it
      if (c.adapter === 'http-plain' && c.scenario !== 'killed_after_seal') {
        if (c.inDoubtAfterFault > 0) expect(c.leftInDoubt, where).to.equal(c.inDoubtAfterFault);
      } else {
        expect(c.leftInDoubt, where).to.equal(0);
        expect(c.resolvedByInspect + c.resolvedByRestart, where).to.equal(c.inDoubtAfterFault);
      }
      if (c.scenario === 'lost_response') expect(c.sideEffects, where).to.equal(c.trials);
      if (c.scenario === 'racing_drivers') expect(c.sideEffects, where).to.equal(c.trials);
    }
  });

  it('R12.2: a saga process killed after the plan was sealed, before its adapter ran: a restarted saga re-drives it from the stored plan alone (resume), exactly one side effect per attempt, its outcome recorded, for every adapter', () => {
    const rows = report.adapters.flatMap((a) => a.counts).filter((c) => c.scenario === 'killed_after_seal');
    expect(rows).to.have.length(ADAPTER_NAMES.length * 2);
    for (const c of rows) {
      const where = `${c.backend} ${c.adapter}`;
      expect([c.sideEffects, c.duplicates, c.outcomesRecorded, c.inDoubtAfterFault, c.listedInDoubt, c.resolvedByRestart, c.leftInDoubt], where).to.deep.equal([c.trials, 0, c.trials, c.trials, c.trials, c.trials, 0]);
    }
    expect(printed).to.match(/sqlite process killed_after_seal +1 +1 +0 +1 /);
  });

  it('R12.1: forged tickets handed to each adapter (a barrier-shaped object, a hand-made execution, a copied ticket, a ticket for another start, attempt or adapter, a ticket after close): every one refused, 0 side effects on the tool\'s side; the table is printed', () => {
    for (const a of report.adapters) {
      expect(a.forgeries.map((f) => f.adapter), a.backend).to.deep.equal([...ADAPTER_NAMES]);
      for (const f of a.forgeries) {
        const where = `${f.backend} ${f.adapter}`;
        expect(f.tried, where).to.be.greaterThan(7);
        expect(f.refused, where).to.equal(f.tried);
        expect(f.sideEffects, where).to.equal(0);
      }
    }
    expect(printed).to.contain('Forged tickets (R12.1)');
    expect(printed).to.match(/postgres mcp-stdio +\d+ +\d+ +0\n/);
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
