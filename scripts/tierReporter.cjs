'use strict';
// mocha's spec reporter, plus each tier's counts (a spec file's tier is its suffix: .int, .soak)
// written as JSON to SB_TIER_COUNTS: scripts/test.mjs runs the int and soak tiers in one mocha
// pool and still prints each tier's counts.
const { writeFileSync } = require('node:fs');
const Mocha = require('mocha');

const { EVENT_TEST_PASS, EVENT_TEST_FAIL, EVENT_TEST_PENDING, EVENT_RUN_END } = Mocha.Runner.constants;

const tierOf = (file) => /\.(\w+)\.spec\.ts$/.exec(file ?? '')?.[1] ?? 'other';

class TierReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    const counts = {};
    // a failed hook arrives as a failed "test" too (mocha counts it so in its own summary)
    const add = (test, key) => {
      const tier = (counts[tierOf(test.file ?? test.parent?.file)] ??= { passed: 0, failed: 0, pending: 0 });
      tier[key]++;
    };
    runner.on(EVENT_TEST_PASS, (t) => add(t, 'passed'));
    runner.on(EVENT_TEST_FAIL, (t) => add(t, 'failed'));
    runner.on(EVENT_TEST_PENDING, (t) => add(t, 'pending'));
    runner.once(EVENT_RUN_END, () => {
      if (process.env.SB_TIER_COUNTS) writeFileSync(process.env.SB_TIER_COUNTS, JSON.stringify(counts));
    });
  }
}

module.exports = TierReporter;
