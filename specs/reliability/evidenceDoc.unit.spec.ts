import { copyFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import type { ReliabilityReport } from '../../reliability';
import { replaceSection, writeEvidence } from '../../reliability/evidenceDoc';
import { freshDir } from '../support/tmp';

// R6.1 docs/evidence.md holds what `npm run reliability` counted: the run writes its tables
// between markers. Writing the committed figures again must give the committed file, so the
// file is exactly what the generator makes (nothing typed by hand between the markers).

const EVIDENCE = join(__dirname, '..', '..', 'docs', 'evidence.md');

/** The adapter rows of the committed table, read back into counts. */
const committedAdapterCounts = (doc: string) =>
  doc
    .split('\n')
    .filter((l) => /^ {2}(sqlite|postgres) \S+ \S+ +\d/.test(l))
    .map((l) => {
      const [backend, adapter, scenario, ...n] = l.trim().split(/ +/);
      const [trials, sideEffects, duplicates, outcomesRecorded, inDoubtAfterFault, listedInDoubt, resolvedByInspect, resolvedByRestart, leftInDoubt, claimHeld, unrecorded] = n.map(Number);
      return { backend, adapter, scenario, trials, sideEffects, duplicates, outcomesRecorded, inDoubtAfterFault, listedInDoubt, resolvedByInspect, resolvedByRestart, leftInDoubt, claimHeld, unrecorded };
    });

const reportOf = (doc: string, profile: 'short' | 'full', withAdapters: boolean): ReliabilityReport =>
  ({
    profile,
    seed: 988036104,
    soak: [
      { backend: 'sqlite', acknowledged: 190, found: 190, partial: 0, lost: 0 },
      { backend: 'postgres', acknowledged: 70, found: 70, partial: 0, lost: 0 },
    ],
    fuzz: { cases: 1000, rejected: 762, rejectedTyped: 762, rowsGained: [] },
    corruption: [
      { backend: 'sqlite', cellsTried: 406, detected: 406 },
      { backend: 'postgres', cellsTried: 365, detected: 365 },
    ],
    forgery: ['sqlite', 'postgres'].map((backend) => ({ backend, attempts: 26, refused: 22, detected: 4, accepted: 0 })),
    failover: [],
    adapters: withAdapters ? [{ backend: 'sqlite', counts: committedAdapterCounts(doc), failures: [] }] : [],
    durationMs: {},
    ok: true,
  }) as unknown as ReliabilityReport;

describe('R6.1 docs/evidence.md is written by npm run reliability', () => {
  const committed = readFileSync(EVIDENCE, 'utf8');

  it('R6.1 writing the committed figures again gives the committed file, byte for byte', () => {
    const copy = join(freshDir('sb-evidence'), 'evidence.md');
    copyFileSync(EVIDENCE, copy);
    // The summary comes from a short run; the adapter table from a full one (3 trials).
    expect(writeEvidence(copy, reportOf(committed, 'short', false), 1)).to.deep.equal(['summary']);
    expect(writeEvidence(copy, { ...reportOf(committed, 'full', true), soak: [] }, 3)).to.deep.equal(['adapters']);
    expect(readFileSync(copy, 'utf8')).to.equal(committed);
  });

  it('R6.1 a run writes only the sections it measured, and refuses a file without its markers', () => {
    const copy = join(freshDir('sb-evidence'), 'evidence.md');
    copyFileSync(EVIDENCE, copy);
    expect(writeEvidence(copy, { ...reportOf(committed, 'short', false), forgery: [] }, 1)).to.deep.equal([]);
    expect(readFileSync(copy, 'utf8')).to.equal(committed);
    expect(() => replaceSection('no markers here', 'summary', 'x')).to.throw(/markers of section summary/);
  });
});
