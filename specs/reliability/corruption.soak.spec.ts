import { expect } from 'chai';
import { runShortHarnesses } from './shortHarness';

// The corruption sweep of `npm run reliability --short` inside `npm test`, one start per
// backend swept cell by cell. It runs as its own harness processes, one per backend (the other
// short phases are specs/reliability/reliability.soak.spec.ts), so `npm test` runs it beside
// them; read back from their JSON reports, as the other phases are. Real SQLite files and real
// PostgreSQL; no timed assertions (the harness bounds its own time).

interface ReportJson {
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
}

describe('reliability harness, short form: the corruption sweep', function () {
  // Above the short run's own 12-minute limit (reliability/run.ts), so the harness stops itself first.
  this.timeout(780_000);
  let report: ReportJson;

  before(async () => {
    // one harness per backend, side by side
    ({ report } = await runShortHarnesses<ReportJson>([{ phases: 'corruption', backends: 'sqlite' }, { phases: 'corruption', backends: 'postgres' }], 'reliability-corruption'));
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

});
