import { expect } from 'chai';
import { FORGERIES, type ForgeryTarget } from '../../testkit/forgery';
import type { OpenTarget } from '../../testkit/forgeryTargets';
import { KEYED_FORGERIES, type OpenKeyedTarget } from '../../testkit/keyedForgery';
import { keyingWindowForgeries } from '../../testkit/keyingWindow';
import { COMPACTION_FORGERIES } from '../../testkit/compactionForgery';
import type { BackendName } from '../../testkit/rawSql';

// R9.1 / R9.2: every forgery of testkit/forgery.ts, tried with the runtime's own credentials
// against one backend: each is refused by the database or reported by `verify` (never
// accepted), and a refusal is the database's own (a history trigger, a missing grant, a
// deferred check at commit), never a slip of the forger's SQL.

const OWN_REFUSAL = /illegal history refused|permission denied|FOREIGN KEY constraint failed/;
/** R14.2: the delete guards' own words, or the retention gate the runtime's connection lacks. */
const COMPACTION_REFUSAL = /illegal history refused|permission denied|append-only|immutable|are facts|never deleted|no such function: ql3_retention_gate/;

export const forgerySuite = (open: () => Promise<OpenTarget>, expected: Readonly<Record<string, 'refused' | 'detected'>> = {}): void => {
  let opened: OpenTarget;
  let target: ForgeryTarget;
  before(async () => {
    opened = await open();
    target = opened.target;
  });
  after(async () => opened?.close());

  for (const f of FORGERIES) {
    it(`R9.1/R9.2 ${f.name}: refused by the database or reported by verify, never accepted`, async () => {
      const { outcome, reason } = await f.attempt(target);
      expect(outcome, reason).to.not.equal('accepted');
      if (outcome === 'refused') expect(reason).to.match(OWN_REFUSAL);
      if (f.refusedBy !== undefined) {
        expect(outcome, reason).to.equal('refused');
        expect(reason).to.match(f.refusedBy);
      }
      const want = expected[f.name];
      if (want !== undefined) expect(outcome, reason).to.equal(want);
    });
  }
};

/**
 * R9.4: the keyed forgeries of testkit/keyedForgery.ts against a store with a deployment
 * keyring. The database accepts each (a legal transition, INSERT rights); every keyed read
 * that shows it refuses it and `verify` reports it: detected, never accepted.
 */
export const keyedForgerySuite = (open: () => Promise<OpenKeyedTarget>): void => {
  let opened: OpenKeyedTarget;
  before(async () => {
    opened = await open();
  });
  after(async () => opened?.close());

  for (const f of KEYED_FORGERIES) {
    it(`R9.4 ${f.name}: every keyed read that shows it fails closed and verify reports it`, async () => {
      const { outcome, reason } = await f.attempt(opened.target);
      expect(outcome, reason).to.equal('detected');
    });
  }
};

/**
 * R14.1: the forgeries of testkit/keyingWindow.ts, each on a fresh store nobody has keyed:
 * an event made to read as written before the key. Each is refused by the database, or
 * detected (the keyed runtime builds no second attempt on it, and `verify` reports it).
 */
export const keyingWindowSuite = (backend: BackendName, fresh: () => Promise<string>): void => {
  for (const f of keyingWindowForgeries(backend)) {
    it(`R14.1 ${f.name}: ${f.expected}, never accepted`, async () => {
      const { outcome, reason } = await f.attempt(await fresh());
      expect(outcome, reason).to.equal(f.expected);
      if (f.refusedBy !== undefined) expect(reason).to.match(f.refusedBy);
    });
  }
};

/**
 * R14.2: the compaction forgeries of testkit/compactionForgery.ts, with the runtime's
 * credentials: compacting a Run, forging a compaction record or a compacted identity. Each is
 * refused by the database (the delete guards, the retention gate): accepted 0.
 */
export const compactionForgerySuite = (open: () => Promise<OpenTarget>): void => {
  let opened: OpenTarget;
  before(async () => {
    opened = await open();
  });
  after(async () => opened?.close());

  for (const f of COMPACTION_FORGERIES) {
    it(`R14.2 ${f.name}: refused by the database, never accepted`, async () => {
      const { outcome, reason } = await f.attempt(opened.target);
      expect(outcome, reason).to.equal('refused');
      expect(reason).to.match(COMPACTION_REFUSAL);
    });
  }
};
