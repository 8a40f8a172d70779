import Database from 'better-sqlite3';
import { expect } from 'chai';
import { CorruptRecordError } from '../../domain';
import { MigrationError, UnreleasedStoreError, openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { BARRIER_APPLICATION_ID, readFileHeader } from '../../infrastructure/sqlite/fileIdentity';
import { checksumOf } from '../../infrastructure/migrations';
import { rebuildOutcomeRows } from '../../projections/outcomeRows';
import { startedScenario } from '../recovery/recoveryConformance';
import { rejects } from '../../testkit/rejects';
import { freshDbPath } from '../support/tmp';
import { RELEASED_MIGRATIONS, store0056From } from './store0056';

// A store the released version wrote (its ADR migrations, 0001-0056, and starts in it) moves to
// today's schema in one migration: every start reads back as it was stored, the projections
// (chain links, outcomes, in-doubt starts) are derived from its log, and it verifies. A store
// written by a version that was never released has no upgrade path: it is refused, untouched.

const rowsOf = (path: string, sql: string): unknown[] => {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare(sql).all();
  } finally {
    db.close();
  }
};

/** Everything an open could change: the objects, the ledger, the header and every row count. */
const fileState = (path: string): unknown => {
  const db = new Database(path, { readonly: true });
  try {
    const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as { name: string }[]).map((t) => t.name);
    return {
      objects: db.prepare('SELECT type, name, sql FROM sqlite_master ORDER BY type, name').all(),
      ledger: db.prepare('SELECT * FROM schema_migrations ORDER BY name').all(),
      header: [db.pragma('user_version', { simple: true }), db.pragma('application_id', { simple: true })],
      rows: tables.map((t) => [t, (db.prepare(`SELECT count(*) AS n FROM "${t}"`).get() as { n: number }).n]),
    };
  } finally {
    db.close();
  }
};

describe('R10.3 a store of the released version (0056) moves to today, one of an unreleased version is refused', function () {
  this.timeout(120_000);

  it('a 0056 store with starts (resolved and in doubt) opens migrated: every start reads back, chain links, outcomes and in-doubt starts derived from its log, verify ok, new starts go on', async () => {
    const source = freshDbPath('released-source');
    const a = await openSqliteStartBarrier({ path: source });
    const lost = await startedScenario(a);
    await a.recovery.resolve(lost.startId, 'lost', { decidedBy: 'ops', reason: 'worker_lost' });
    const done = await startedScenario(a);
    await a.recovery.resolve(done.startId, 'completed', { decidedBy: 'ops', reason: 'tool_succeeded' });
    const open = await startedScenario(a);
    const stored = await Promise.all([lost, done, open].map((s) => a.barriers.getByStartId(s.startId)));
    await a.close();
    const chain = rowsOf(source, 'SELECT global_position, chain_digest FROM events ORDER BY global_position');
    const outcomes = rowsOf(source, 'SELECT * FROM start_outcomes ORDER BY start_id');

    const path = freshDbPath('released');
    store0056From(source, path);
    expect(rowsOf(path, 'SELECT name FROM schema_migrations ORDER BY name')).to.deep.equal(RELEASED_MIGRATIONS.map((m) => ({ name: m.name })));
    expect(readFileHeader(path).applicationId, 'the released file has no application id').to.equal(0);

    const b = await openSqliteStartBarrier({ path });
    try {
      expect(readFileHeader(path).applicationId).to.equal(BARRIER_APPLICATION_ID);
      expect((b.db.prepare('SELECT name FROM schema_migrations ORDER BY name').all() as { name: string }[]).map((r) => r.name)).to.deep.equal([
        ...RELEASED_MIGRATIONS.map((m) => m.name),
        '0057-start-barrier-schema',
      ]);
      for (const [i, s] of [lost, done, open].entries()) expect(await b.barriers.getByStartId(s.startId), s.startId).to.deep.equal(stored[i]);
      expect(b.db.prepare('SELECT global_position, chain_digest FROM events ORDER BY global_position').all()).to.deep.equal(chain);
      const upgraded = b.db.prepare('SELECT * FROM start_outcomes ORDER BY start_id').all();
      expect(upgraded).to.deep.equal(outcomes);
      const events = b.db.prepare('SELECT stream_id, stream_position, event_id, event_type, data_json, committed_at_ms FROM events ORDER BY global_position').all();
      expect(upgraded).to.deep.equal(rebuildOutcomeRows(events as never).sort((x, y) => (x.start_id < y.start_id ? -1 : 1)));
      expect((await b.recovery.inDoubt()).map((e) => e.startId)).to.deep.equal([open.startId]);
      const report = await b.recovery.verify();
      expect(report.ok, JSON.stringify(report.problems)).to.equal(true);
      // an exact replay is the stored start; a new start commits beside the old ones
      expect((await b.barriers.prepare(open.s.startCommand())).outcome).to.equal('existing');
      const next = await startedScenario(b);
      expect((await b.recovery.inDoubt()).map((e) => e.startId).sort()).to.deep.equal([open.startId, next.startId].sort());
      expect((await b.recovery.verify()).ok).to.equal(true);
    } finally {
      await b.close();
    }
  });

  it('a 0056 store whose stored JSON copy differs from its event is refused, nothing applied (the evidence of the difference is kept)', async () => {
    const source = freshDbPath('released-source');
    const a = await openSqliteStartBarrier({ path: source });
    const one = await startedScenario(a);
    await a.close();
    const path = freshDbPath('released-differs');
    store0056From(source, path);
    const db = new Database(path);
    db.exec('DROP TRIGGER trace_anchors_no_update');
    db.prepare("UPDATE trace_anchors SET anchor_json = anchor_json || ' ' WHERE start_id = ?").run(one.startId);
    db.close();
    const before = fileState(path);
    const e = await rejects(openSqliteStartBarrier({ path }));
    expect(e).to.be.instanceOf(MigrationError);
    expect(e.message).to.match(/0057-start-barrier-schema failed: .*a_stored_json_differs_from_its_event/);
    expect(fileState(path)).to.deep.equal(before);
  });

  it('a store whose ledger names a migration this package does not ship (written by an unreleased version) is refused on open, read-only open and migrate, typed, naming it; nothing written', async () => {
    const path = freshDbPath('unreleased');
    await (await openSqliteStartBarrier({ path })).close();
    const db = new Database(path);
    // the ledger of an unreleased version: the ADR's migrations, then ones this package never shipped
    db.exec("DELETE FROM schema_migrations WHERE name = '0057-start-barrier-schema'");
    for (const name of ['0057-recovery-read-models', '0080-each-fact-stored-once']) db.prepare('INSERT INTO schema_migrations (name, checksum, applied_at_ms) VALUES (?, ?, ?)').run(name, checksumOf(name), 1);
    db.pragma('user_version = 80');
    db.close();
    const before = fileState(path);
    for (const readOnly of [false, true]) {
      const e = await rejects(openSqliteStartBarrier({ path, readOnly }));
      expect(e, `readOnly ${readOnly}`).to.be.instanceOf(UnreleasedStoreError);
      expect(e).to.not.be.instanceOf(CorruptRecordError);
      expect((e as UnreleasedStoreError).code).to.equal('MIGRATION_REFUSED');
      expect((e as UnreleasedStoreError).migration).to.equal('0057-recovery-read-models');
      expect(e.message).to.match(/names 0057-recovery-read-models, which this package does not ship: the store was written by an unreleased version and must be recreated/);
      expect(fileState(path)).to.deep.equal(before);
    }
  });
});
