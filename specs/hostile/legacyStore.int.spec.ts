import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { expect } from 'chai';
import { ValidationError } from '../../domain';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { BARRIER_APPLICATION_ID, readFileHeader } from '../../infrastructure/sqlite/fileIdentity';
import { rejects } from '../../testkit/rejects';
import { freshDbPath } from '../support/tmp';

// R10.2: stores written before reason codes hold free text that is bound by digest into
// immutable, chained records: a barrier whose command carried `annotations`, an outcome with a
// prose reason. The fixture was written by the code of that time (a SQLite file); after this
// code's migrations it still verifies on every read, and nothing new of that kind can be written.

const FIXTURES = join(__dirname, '..', 'fixtures');
const ANNOTATED = 'start-legacy-annotated-v3';
const OPEN = 'start-legacy-open-v3';

const legacyChecks = (open: () => Promise<RecoverableStartBarrierAuthority>) => {
  it('R10.2 an old store (barriers with annotations, a free-text reason) still verifies after the new migrations, and reads its legacy records', async () => {
    const a = await open();
    try {
      const report = await a.recovery.verify();
      expect(report.ok, JSON.stringify(report.problems)).to.equal(true);
      expect(report.checked.barriers).to.equal(2);
      const annotated = await a.barriers.getByStartId(ANNOTATED);
      expect(annotated?.record.annotations).to.deep.equal({ note: 'Operator approved after review; ticket OPS-1234.' });
      expect(await a.recovery.outcome(ANNOTATED)).to.include({ outcome: 'lost', reason: 'worker node died; no trace of the tool' });
      expect((await a.recovery.inDoubt()).map((s) => s.startId)).to.deep.equal([OPEN]);
      // the replay of an old annotated command is refused: the field no longer exists (R10.2)
      const error = await rejects(a.barriers.prepare({ ...(await a.barriers.getByStartId(OPEN))!.record, annotations: {} } as never));
      expect(error).to.be.instanceOf(ValidationError);
      // new outcomes carry codes; the store keeps verifying with old and new side by side
      const resolved = await a.recovery.resolve(OPEN, 'completed', { decidedBy: 'oncall-ana', reason: 'checked_tool_log', ticket: 'OPS-77', note: 'all good' });
      expect(resolved.outcome).to.include({ reason: 'checked_tool_log', ticket: 'OPS-77' });
      await a.recovery.purgeNote(OPEN);
      const after = await a.recovery.verify();
      expect(after.ok, JSON.stringify(after.problems)).to.equal(true);
      expect(after.notes).to.deep.equal({ present: 0, purged: 1 });
    } finally {
      await a.close();
    }
  });
};

describe('R10.2 legacy stores keep verifying', function () {
  this.timeout(120_000);

  describe('SQLite (a file written before R10.2)', () => {
    legacyChecks(async () => {
      const path = freshDbPath('legacy');
      writeFileSync(path, gunzipSync(readFileSync(join(FIXTURES, 'legacy-store-before-r10.2.sqlite.gz'))));
      expect(readFileHeader(path).applicationId, 'the old file has no application id yet').to.equal(0);
      const a = await openSqliteStartBarrier({ path });
      expect(readFileHeader(path).applicationId, 'its first migration stamps it').to.equal(BARRIER_APPLICATION_ID);
      return a;
    });
  });
});
