import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freshDir } from '../support/tmp';
import { spawnTsxWorker } from '../../testkit/workerProcess';

// The short form of `npm run reliability` inside `npm test`: 10 SIGKILLs per backend, ~1,000
// fuzzed commands and as many fuzzed stored records, a corruption sweep of one start per
// backend, every forgery of testkit/forgery.ts per backend, and the PostgreSQL failover once (two clusters made and removed by the harness).
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
  readonly corruption: {
    backend: string;
    cellsTried: number;
    detected: number;
    undetected: unknown[];
    cliRuns: number;
    cliExit5: number;
    failures: unknown[];
    tables: number;
    columns: number;
    columnsReached: number;
  }[];
  readonly forgery: { backend: string; attempts: number; refused: number; detected: number; accepted: number; outcomes: { name: string; outcome: string }[] }[];
  readonly failover: (Outcomes & {
    timelines: { before: number; promoted: number };
    fenced: { refused: boolean };
    rewound: { streaming: boolean; synchronous: boolean; found: number; expected: number };
  })[];
}

describe('reliability harness, short form', function () {
  this.timeout(360_000);
  let report: ReportJson;
  let SHORT: ReportJson['sizes'];

  before(async () => {
    const json = join(freshDir('reliability'), 'report.json');
    // The adapters phase has its own short form (specs/reliability/adapters.soak.spec.ts).
    const run = spawnTsxWorker(join(__dirname, '..', '..', 'reliability', 'run.ts'), ['--short', '--only', 'soak,fuzz,corruption,forgery,failover', '--json', json, '--no-docs']);
    const exit = await run.exited;
    // The counts the full run prints, for whoever reads the test log.
    console.log(run.lines.join('\n').replace(/^/gm, '      '));
    expect(exit.signal, run.stderr()).to.equal(null);
    report = JSON.parse(readFileSync(json, 'utf8')) as ReportJson;
    SHORT = report.sizes;
  });

  it('R9.1/R9.2 forgery phase: every forgery with the runtime\'s credentials is refused by the database or reported by verify; accepted = 0 (both backends: every unkeyed one refused, the keyed ones detected)', () => {
    expect(report.forgery.map((f) => f.backend)).to.deep.equal(['sqlite', 'postgres']);
    for (const f of report.forgery) {
      expect(f.attempts, f.backend).to.be.greaterThan(0);
      expect(f.refused + f.detected, f.backend).to.equal(f.attempts);
      expect(f.accepted, `${f.backend}: ${JSON.stringify(f.outcomes.filter((o) => o.outcome === 'accepted'))}`).to.equal(0);
    }
    const pg = report.forgery.find((f) => f.backend === 'postgres')!;
    // R9.4: a legal event appended without the key passes the database's history checks; the keyed reads and verify catch it
    expect(pg.outcomes.filter((o) => o.name.startsWith('keyed: ')).length, JSON.stringify(pg.outcomes)).to.be.greaterThan(0);
    // every other forgery is refused by the database, on SQLite too (0072), like PostgreSQL's
    for (const f of report.forgery) {
      const keyed = f.outcomes.filter((o) => o.name.startsWith('keyed: '));
      expect(keyed.every((o) => o.outcome === 'detected'), JSON.stringify(keyed)).to.equal(true);
      expect(f.refused, `${f.backend}: ${JSON.stringify(f.outcomes)}`).to.equal(f.attempts - keyed.length);
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

  it('R5.3/R9.2 corruption sweep over every table of the live schema: every damaged cell is detected by the repository, by verify, and by the CLI (exit 5): detected = tried on both backends, no gap allowed', () => {
    expect(report.corruption.map((c) => c.backend)).to.deep.equal(['sqlite', 'postgres']);
    for (const c of report.corruption) {
      expect(c.cellsTried, c.backend).to.be.greaterThan(100);
      // every table of the live schema was swept (a table without a target is a failure below);
      // no miss is allowed anywhere: every cell tried is detected
      expect(c.tables, c.backend).to.be.greaterThan(10);
      expect(c.columnsReached, c.backend).to.equal(c.columns);
      expect(c.detected, c.backend).to.equal(c.cellsTried);
      expect(c.undetected, c.backend).to.deep.equal([]);
      expect(c.cliExit5, c.backend).to.equal(c.cliRuns);
      expect(c.failures, c.backend).to.deep.equal([]);
    }
  });

  it('R8 PostgreSQL failover: no acknowledged start lost, ambiguity resolved by replay, old primary fenced until pg_rewind', () => {
    expect(report.failover).to.have.length(1);
    const f = report.failover[0]!;
    expect(f.acknowledged).to.be.greaterThan(0);
    expect(f.found).to.equal(f.acknowledged);
    expect(f.lost).to.equal(0);
    expect(f.partial).to.equal(0);
    expect(f.resolvedExisting + f.resolvedCreated).to.equal(f.ambiguous);
    expect(f.timelines.promoted).to.be.greaterThan(f.timelines.before);
    expect(f.fenced.refused).to.equal(true);
    expect(f.rewound).to.deep.include({ streaming: true, synchronous: true });
    expect(f.rewound.found).to.equal(f.rewound.expected);
    expect(f.failures).to.deep.equal([]);
    expect(f.problems).to.deep.equal([]);
  });
});
