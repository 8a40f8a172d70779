import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { withTriggersDropped } from '../../testkit/damage';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { STRAY_IDENTITIES } from '../../infrastructure/sqlite/recoverySql';
import { migrateUpTo } from './migrateUpTo';
import { CorruptRecordError, type ToolExecutionStartCommand } from '../../domain';
import type { Scenario } from '../../domain/scenario';
import { openFreshSqlite } from './support';
import { setUp } from '../conformance/startBarrierConformance';
import { freshDbPath } from '../support/tmp';
import { rejects } from '../../testkit/rejects';

// The compact replay index (0081): an old store (the legacy fixture, migrated to just before
// 0081) moves forward without the command digest each identity row repeated and without the
// start_id index; the index then equals the old one joined with the barriers, row for row, each
// R4.1 identity is still refused twice by the one unique index, and the store verifies.

const FIXTURE = join(__dirname, '..', 'fixtures', 'legacy-store-before-r10.2.sqlite.gz');


const oldStore = (name: string): string => {
  const path = freshDbPath(name);
  writeFileSync(path, gunzipSync(readFileSync(FIXTURE)));
  return path;
};

describe('the compact replay index on SQLite (0081)', function () {
  this.timeout(120_000);

  it('R4.1 an old store moves forward: the same index rows (command digest from the barrier), one unique index, no start_id index, and it verifies', async () => {
    const path = oldStore('compact-index');
    const old = new Database(path);
    migrateUpTo(old, '0081');
    const before = old.prepare('SELECT identity, value, start_id, command_digest FROM start_replay_identities ORDER BY identity, value').all();
    expect(before).to.have.length(14);
    old.close();

    const a = await openSqliteStartBarrier({ path });
    const db = a.db as unknown as Database.Database;
    try {
      const columns = (db.prepare("SELECT name FROM pragma_table_info('start_replay_identities')").all() as { name: string }[]).map((c) => c.name);
      expect(columns).to.deep.equal(['identity', 'value', 'start_id']);
      const indexes = (db.prepare("SELECT name, \"unique\" FROM pragma_index_list('start_replay_identities') ORDER BY name").all() as { name: string; unique: number }[]);
      // one unique index: the table's own primary key since 0082 (keyedTables.int.spec.ts)
      expect(indexes).to.deep.equal([{ name: 'sqlite_autoindex_start_replay_identities_1', unique: 1 }]);
      const after = db
        .prepare(`SELECT i.identity, i.value, i.start_id, b.command_digest FROM start_replay_identities i
          JOIN tool_execution_start_barriers b ON b.start_id = i.start_id ORDER BY i.identity, i.value`)
        .all();
      expect(after).to.deep.equal(before);
      expect(() => db.prepare("UPDATE start_replay_identities SET value = 'x'").run()).to.throw(/immutable/);
      expect(() => db.prepare('DELETE FROM start_replay_identities').run()).to.throw(/immutable/);
      const report = await a.recovery.verify();
      expect(report.ok, JSON.stringify(report.problems)).to.equal(true);
      expect(report.checked.barriers).to.equal(2);
    } finally {
      await a.close();
    }
  });

  it('a store whose index row repeats a command digest its barrier does not hold is refused, not migrated', async () => {
    const path = oldStore('compact-index-differs');
    const old = new Database(path);
    migrateUpTo(old, '0081');
    old.exec('DROP TRIGGER start_replay_identities_no_update');
    old.exec("UPDATE start_replay_identities SET command_digest = 'sha256:0' WHERE rowid = 1");
    old.close();
    const error = await rejects(openSqliteStartBarrier({ path }));
    expect(String(error)).to.contain('a_replay_identity_differs_from_its_barrier');
    const again = new Database(path, { readonly: true });
    expect((again.prepare("SELECT count(*) AS n FROM schema_migrations WHERE name >= '0081'").get() as { n: number }).n).to.equal(0);
    expect((again.prepare("SELECT count(*) AS n FROM pragma_table_info('start_replay_identities') WHERE name = 'command_digest'").get() as { n: number }).n).to.equal(1);
    again.close();
  });

  /** A fresh store with one committed start, for `body`; closed after. */
  const withStarted = async (body: (a: Awaited<ReturnType<typeof openFreshSqlite>>, db: Database.Database, s: Scenario, command: ToolExecutionStartCommand) => Promise<void>): Promise<void> => {
    const a = await openFreshSqlite();
    try {
      const s = await setUp(a);
      const command = s.startCommand();
      await a.barriers.prepare(command);
      await body(a, a.db as unknown as Database.Database, s, command);
    } finally {
      await a.close();
    }
  };

  it('R4.1, R9.1 the barrier writes its own seven index rows; a row naming a start under a value its barrier does not hold is refused, nothing written', () =>
    withStarted(async (a, db, s, command) => {
      const rows = () => db.prepare('SELECT identity, value FROM start_replay_identities WHERE start_id = ? ORDER BY identity').all(command.startId);
      const before = rows();
      expect(before.map((r) => (r as { identity: string }).identity)).to.deep.equal(['attempt', 'auditEventId', 'auditReceiptId', 'mutationId', 'runEventId', 'startId', 'traceId']);
      const version = (await a.barriers.getByStartId(command.startId))!.record.attempt.startedStepRunVersion;
      expect(before).to.deep.include({ identity: 'attempt', value: JSON.stringify([s.runId, s.stepRunId, version]) });
      for (const [identity, value, startId] of [
        ['traceId', 'trace-stray', command.startId],
        ['startId', 'start-stray', command.startId],
        ['attempt', JSON.stringify([s.runId, s.stepRunId, version + 1]), command.startId],
        ['attempt', `[${JSON.stringify(s.runId)}, ${JSON.stringify(s.stepRunId)}, ${version}]`, command.startId], // the same key, printed otherwise
        ['traceId', 'trace-stray', 'no-such-start'],
      ]) {
        expect(() => db.prepare('INSERT INTO start_replay_identities (identity, value, start_id) VALUES (?, ?, ?)').run(identity, value, startId), `${identity} ${value}`).to.throw(
          /a replay identity is a value its barrier holds/,
        );
      }
      expect(rows()).to.deep.equal(before);
      expect((await a.recovery.verify()).ok).to.equal(true);
    }));

  it('R4.1 a row naming a start under a value its barrier does not hold (written past the trigger, as an owner could): verify names it, a lookup of that value fails closed, the start still reads', () =>
    withStarted(async (a, db, _s, command) => {
      withTriggersDropped(db, (t) => t.name === 'start_replay_identities_from_barrier', () =>
        db.prepare("INSERT INTO start_replay_identities (identity, value, start_id) VALUES ('traceId', 'trace-stray', ?)").run(command.startId),
      );
      expect(db.prepare(STRAY_IDENTITIES).all()).to.deep.equal([{ identity: 'traceId', value: 'trace-stray', start_id: command.startId }]);
      const report = await a.recovery.verify();
      expect(report.problems.map((p) => [p.kind, p.record])).to.deep.include(['stray_identity', 'traceId trace-stray']);
      const lookup = await rejects(a.recovery.lookup('traceId', 'trace-stray'));
      expect(lookup, lookup.message).to.be.instanceOf(CorruptRecordError);
      expect((await a.barriers.getByStartId(command.startId))?.record.startId).to.equal(command.startId);
    }));
});
