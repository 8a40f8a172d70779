import { expect } from 'chai';
import { runShortHarnesses } from './shortHarness';

// The short form of `npm run reliability` inside `npm test`: 10 SIGKILLs per backend, ~1,000
// fuzzed commands and as many fuzzed stored records, every forgery of testkit/forgery.ts per
// backend, and the PostgreSQL failover on a Patroni cluster (etcd, three nodes, HAProxy; made
// and removed by the harness): one switchover and one kill -9 of the leader's postmaster. The
// corruption sweep (corruption.soak.spec.ts) and the adapters phase (adapters.soak.spec.ts) run
// as their own harness processes, so `npm test` runs the three side by side.
// Real SQLite files and real PostgreSQL throughout; no timed assertions (the harness bounds
// its own time and fails if it runs over). It runs as its own process, as an operator runs it,
// and is read back from its JSON report: specs/ and reliability/ share only testkit/.

interface Outcomes {
  acknowledged: number;
  found: number;
  partial: number;
  lost: number;
  ambiguous: number;
  resolvedExisting: number;
  resolvedCreated: number;
  problems: unknown[];
  failures: unknown[];
}
interface ReportJson {
  readonly ok: boolean;
  readonly sizes: { soak: { kills: number; workers: number }; fuzz: { cases: number; recordCases: number } };
  readonly soak: (Outcomes & { backend: string; kills: number; processesKilled: number })[];
  readonly fuzz?: {
    cases: number;
    crashes: number;
    rejected: number;
    rejectedTyped: number;
    invalidCases: number;
    invalidAtPath: number;
    rowsGained: unknown[];
    failures: unknown[];
    records: { cases: number; changed: number; detected: number; sameAsOracle: number };
  };
  readonly forgery: { backend: string; attempts: number; refused: number; detected: number; accepted: number; outcomes: { name: string; outcome: string }[] }[];
  readonly failover: (Outcomes & {
    untyped: number;
    events: {
      event: string;
      acknowledged: number;
      foundOnEveryNode: number;
      nodes: number;
      lost: number;
      partial: number;
      ambiguous: number;
      settledCreated: number;
      settledExisting: number;
      unsettled: number;
      leaderBefore: string;
      leaderAfter: string;
      timelines: { before: number; after: number };
      errors: Record<string, number>;
    }[];
  })[];
}

describe('reliability harness, short form', function () {
  // Above the short run's own 12-minute limit (reliability/run.ts), so the harness stops itself first.
  this.timeout(780_000);
  let report: ReportJson;
  let SHORT: ReportJson['sizes'];

  before(async () => {
    // the failover phase (a Patroni cluster's boot, then its events) beside the others
    ({ report } = await runShortHarnesses<ReportJson>([{ phases: 'soak,fuzz,forgery' }, { phases: 'failover' }], 'reliability'));
    SHORT = report.sizes;
  });

  it('R9.1/R9.2 forgery phase: every forgery with the runtime\'s credentials is refused by the database or reported by verify; accepted = 0 (both backends: every unkeyed one refused, the keyed ones detected, R14.1 the keying-window ones refused or detected)', () => {
    expect(report.forgery.map((f) => f.backend)).to.deep.equal(['sqlite', 'postgres']);
    for (const f of report.forgery) {
      expect(f.attempts, f.backend).to.be.greaterThan(0);
      expect(f.refused + f.detected, f.backend).to.equal(f.attempts);
      expect(f.accepted, `${f.backend}: ${JSON.stringify(f.outcomes.filter((o) => o.outcome === 'accepted'))}`).to.equal(0);
    }
    const pg = report.forgery.find((f) => f.backend === 'postgres')!;
    // R9.4: a legal event appended without the key passes the database's history checks; the keyed reads and verify catch it
    expect(pg.outcomes.filter((o) => o.name.startsWith('keyed: ')).length, JSON.stringify(pg.outcomes)).to.be.greaterThan(0);
    // every other forgery is refused by the database, on SQLite too (0072), like PostgreSQL's;
    // R14.1: the keying-window ones are refused or detected (testkit/keyingWindow.ts says which)
    for (const f of report.forgery) {
      const keyed = f.outcomes.filter((o) => o.name.startsWith('keyed: '));
      expect(keyed.every((o) => o.outcome === 'detected'), JSON.stringify(keyed)).to.equal(true);
      const window = f.outcomes.filter((o) => o.name.startsWith('keying window: '));
      expect(window.length, f.backend).to.be.greaterThan(0);
      const windowDetected = window.filter((o) => o.outcome === 'detected').length;
      expect(f.refused, `${f.backend}: ${JSON.stringify(f.outcomes)}`).to.equal(f.attempts - keyed.length - windowDetected);
    }
  });

  it('R3.9 crash soak: SIGKILLed workers leave every acknowledged start present, verified and whole, on SQLite and PostgreSQL', () => {
    expect(report.soak.map((s) => s.backend)).to.deep.equal(['sqlite', 'postgres']);
    for (const s of report.soak) {
      expect(s.kills, s.backend).to.equal(SHORT.soak.kills);
      expect(s.processesKilled, s.backend).to.equal(SHORT.soak.kills * SHORT.soak.workers);
      expect(s.acknowledged, s.backend).to.be.greaterThan(0);
      expect(s.found, s.backend).to.equal(s.acknowledged);
      expect(s.partial, s.backend).to.equal(0);
      expect(s.lost, s.backend).to.equal(0);
      expect(s.problems, s.backend).to.deep.equal([]);
      expect(s.failures, s.backend).to.deep.equal([]);
      expect(s.resolvedExisting + s.resolvedCreated, `${s.backend}: every start in flight at a kill resolves by replay (R4.2)`).to.equal(s.ambiguous);
    }
  });

  it('R1.1/R1.5 bad input: every invalid command is a typed ValidationError with a path, nothing crashes, no table gains a row', () => {
    const f = report.fuzz!;
    expect(f.cases).to.equal(SHORT.fuzz.cases);
    expect(f.crashes).to.equal(0);
    expect(f.rejectedTyped).to.equal(f.rejected);
    expect(f.invalidAtPath).to.equal(f.invalidCases);
    expect(f.rowsGained).to.deep.equal([]);
    expect(f.failures).to.deep.equal([]);
  });

  it('R5.3 stored records fuzzed through the decoders: every change is CorruptRecordError, never a crash or a silent accept', () => {
    const r = report.fuzz!.records;
    expect(r.cases).to.equal(SHORT.fuzz.recordCases);
    expect(r.detected).to.equal(r.changed);
    // the one-pass verifier every read path uses gave its oracle's verdict and error on each
    expect(r.sameAsOracle).to.equal(r.cases);
  });

  it('R8/R13.2 PostgreSQL failover on Patroni (synchronous_mode_strict, through HAProxy): a switchover and a kill -9 of the leader\'s postmaster lose no acknowledged start, leave none partial, every acknowledged start is on all three nodes, every ambiguous start settles by replay', () => {
    expect(report.failover).to.have.length(1);
    const f = report.failover[0]!;
    expect(f.events.map((e) => e.event)).to.deep.equal(['switchover', 'kill_postmaster']);
    for (const e of f.events) {
      expect(e.acknowledged, e.event).to.be.greaterThan(0);
      expect(e.nodes, e.event).to.equal(3);
      expect(e.foundOnEveryNode, e.event).to.equal(e.acknowledged);
      expect(e.lost, e.event).to.equal(0);
      expect(e.partial, e.event).to.equal(0);
      expect(e.unsettled, e.event).to.equal(0);
      expect(e.settledCreated + e.settledExisting, e.event).to.equal(e.ambiguous);
    }
    // Patroni moved the leader on the switchover, onto a new timeline.
    const switchover = f.events[0]!;
    expect(switchover.leaderAfter).to.not.equal(switchover.leaderBefore);
    expect(switchover.timelines.after).to.be.greaterThan(switchover.timelines.before);
    expect(f.lost).to.equal(0);
    expect(f.partial).to.equal(0);
    expect(f.failures).to.deep.equal([]);
    expect(f.problems).to.deep.equal([]);
  });

  it('R13.3 PostgreSQL failover on Patroni: every error callers saw through the switch is typed (a node Patroni restarts read-only answers STORE_UNAVAILABLE read_only)', () => {
    const f = report.failover[0]!;
    const untyped = f.events.flatMap((e) => Object.keys(e.errors).filter((k) => k.startsWith('untyped')));
    expect(untyped, JSON.stringify(f.events.map((e) => e.errors))).to.deep.equal([]);
  });
});
