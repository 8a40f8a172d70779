import { expect } from 'chai';
import { CorruptRecordError } from '../../domain';
import { buildScenario } from '../../domain/scenario';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { mapSqliteError } from '../../infrastructure/sqlite/errors';
import { FORGERIES } from '../../testkit/forgery';
import { sqliteForgeryTarget } from '../../testkit/forgeryTargets';
import { compactionForgerySuite, forgerySuite, keyedForgerySuite, keyingWindowSuite } from '../conformance/forgeryConformance';
import { openKeyedForgeryTarget } from '../../testkit/keyedForgery';
import { freshDbPath } from '../support/tmp';

// R9.1 / R9.2 on SQLite: any process may open the file, with foreign keys off as SQLite
// defaults them. The history triggers refuse every forgery of the list at insert time, as
// PostgreSQL does (a lifecycle event is checked against its StepRun head, 0072); what only
// COMMIT could refuse (a start fact without its move, under foreign keys off) is refused by
// the event checks before it, and `verify` stays the net for a process that drops triggers.
describe('R9.1/R9.2 forgeries by another process on SQLite: refused by triggers', function () {
  this.timeout(120_000);
  forgerySuite(
    () => sqliteForgeryTarget(freshDbPath('forgery'), freshDbPath('forgery-source')),
    Object.fromEntries(FORGERIES.map((f) => [f.name, 'refused'])),
  );
});

describe('R9.4 keyed forgeries by another process on SQLite (no key): detected by every keyed read and by verify', function () {
  this.timeout(120_000);
  keyedForgerySuite(async () => {
    const path = freshDbPath('keyed-forgery');
    await (await openSqliteStartBarrier({ path })).close();
    return openKeyedForgeryTarget('sqlite', path);
  });
});

describe('R14.1 keying window forgeries by another connection on SQLite (the raw file written around keying): refused or detected, accepted 0', function () {
  this.timeout(120_000);
  keyingWindowSuite('sqlite', async () => {
    const path = freshDbPath('keying-window');
    await (await openSqliteStartBarrier({ path })).close(); // migrated, never keyed
    return path;
  });
});

describe('R9.1 a history refusal on the runtime\'s own path is typed (SQLite)', () => {
  it('R9.1 the trigger\'s refusal maps to CORRUPT_RECORD, never a raw driver error', async () => {
    const a = await openSqliteStartBarrier({ path: freshDbPath('refusal') });
    try {
      const s = buildScenario();
      for (const c of s.lifecycle) await a.runs.handle(c);
      let raw: unknown;
      try {
        a.db.prepare('UPDATE streams SET version = version + 1 WHERE stream_id = ?').run(`run-${s.runId}`);
      } catch (e) {
        raw = e;
      }
      const mapped = mapSqliteError(raw);
      expect(mapped, String(raw)).to.be.instanceOf(CorruptRecordError);
      expect((mapped as CorruptRecordError).code).to.equal('CORRUPT_RECORD');
      expect((mapped as Error).message).to.contain('illegal history refused');
    } finally {
      await a.close();
    }
  });
});

describe('R14.2 compaction forgeries by another process on SQLite: refused by the delete guards and the retention gate', function () {
  this.timeout(120_000);
  compactionForgerySuite(() => sqliteForgeryTarget(freshDbPath('compaction-forgery'), freshDbPath('compaction-forgery-source')));
});
