import { openSync, closeSync, writeSync } from 'node:fs';
import { expect } from 'chai';
import { CorruptRecordError, StoreUnavailableError, type UnavailableReason } from '../../domain';
import { openSqliteStartBarrier, type SqliteStartBarrier } from '../../infrastructure/sqlite';
import { rejects } from '../../testkit/rejects';
import { setUp } from '../conformance/startBarrierConformance';
import { freshDbPath } from '../support/tmp';
import { openFreshSqlite, sqliteCounts } from './support';

// R9.5 on SQLite: storage that cannot take a write is STORE_UNAVAILABLE (a full disk made real
// with max_page_count; read-only storage made real with query_only, since the specs run as root
// and a chmod does not bind root), and a file SQLite finds malformed is CORRUPT_RECORD. Never a
// raw driver error, and nothing half written.

describe('SQLite unavailable and malformed storage (R9.5)', () => {
  it('R9.5 a read-only open (SQLITE_READONLY) fails prepare with STORE_UNAVAILABLE read_only; its reads answer', async () => {
    const path = freshDbPath();
    const a = await openSqliteStartBarrier({ path });
    const s = await setUp(a);
    await a.close();
    const b = await openSqliteStartBarrier({ path, readOnly: true });
    try {
      const e = await rejects(b.barriers.prepare(s.startCommand()));
      expect(e, String(e)).to.be.instanceOf(StoreUnavailableError);
      expect((e as StoreUnavailableError).reason).to.equal('read_only');
      expect(await b.runs.getStepRun(s.runId, s.stepRunId)).to.not.equal(null);
    } finally {
      await b.close();
    }
  });

  const refusals: readonly (readonly [string, UnavailableReason, (a: SqliteStartBarrier) => void])[] = [
    // VACUUM first: the free pages a migration leaves (0080 rebuilds five tables) would hold a start
    [
      'a full database (SQLITE_FULL)',
      'disk_full',
      (a) => {
        a.db.exec('VACUUM');
        a.db.pragma(`max_page_count = ${Number(a.db.pragma('page_count', { simple: true }))}`);
      },
    ],
    ['read-only storage (query_only: SQLITE_READONLY)', 'read_only', (a) => void a.db.pragma('query_only = ON')],
  ];
  for (const [what, reason, refuse] of refusals) {
    it(`R9.5 ${what} fails prepare with STORE_UNAVAILABLE ${reason}, nothing written; reads still answer`, async () => {
      const a = await openFreshSqlite();
      try {
        const s = await setUp(a);
        const before = sqliteCounts(a);
        refuse(a);
        const e = await rejects(a.barriers.prepare(s.startCommand()));
        expect(e, String(e)).to.be.instanceOf(StoreUnavailableError);
        expect((e as StoreUnavailableError).reason).to.equal(reason);
        expect(sqliteCounts(a)).to.deep.equal(before);
        expect(await a.runs.getStepRun(s.runId, s.stepRunId)).to.not.equal(null);
      } finally {
        await a.close();
      }
    });
  }

  it('R9.5 a barrier file whose pages after the header are garbage (SQLITE_CORRUPT) is CORRUPT_RECORD on a writable and on a read-only open', async () => {
    const path = freshDbPath();
    const a = await openSqliteStartBarrier({ path });
    await a.barriers.prepare((await setUp(a)).startCommand());
    const pageSize = Number(a.db.pragma('page_size', { simple: true }));
    const pages = Number(a.db.pragma('page_count', { simple: true }));
    a.db.pragma('wal_checkpoint(TRUNCATE)');
    await a.close();
    const fd = openSync(path, 'r+');
    try {
      // the header page (application id, schema root) stays; every table and index page goes
      for (let p = 1; p < pages; p++) writeSync(fd, Buffer.alloc(pageSize, 0x5a), 0, pageSize, p * pageSize);
    } finally {
      closeSync(fd);
    }
    for (const readOnly of [false, true]) {
      const e = await rejects(openSqliteStartBarrier({ path, readOnly }).then(async (b) => {
        await b.close();
        throw new Error('opened');
      }));
      expect(e, `readOnly ${readOnly}: ${String(e)}`).to.be.instanceOf(CorruptRecordError);
    }
  });
});
