import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { migrateUpTo } from './migrateUpTo';
import { setUp } from '../conformance/startBarrierConformance';
import { freshDbPath } from '../support/tmp';
import { UNDO_KEYED_INDEX, UNDO_WHOLE_START_KEYED } from './historyUndo';
import { rejects } from '../../testkit/rejects';

// The replay index keyed by its own identity (0082): an old store moves forward with the same
// index rows in a WITHOUT ROWID table whose primary key (identity, value) is the one unique index
// of every R4.1 identity; a store it cannot carry over row for row is refused, not migrated.
// start_whole_at_commit keyed by its start id (0083): the same rows and the same deferred check.

const FIXTURE = join(__dirname, '..', 'fixtures', 'legacy-store-before-r10.2.sqlite.gz');


const oldStore = (name: string, before = '0082'): string => {
  const path = freshDbPath(name);
  writeFileSync(path, gunzipSync(readFileSync(FIXTURE)));
  const old = new Database(path);
  migrateUpTo(old, before);
  old.close();
  return path;
};

const ROWS = 'SELECT identity, value, start_id FROM start_replay_identities ORDER BY identity, value';
const tableSql = (db: Database.Database, table = 'start_replay_identities'): string =>
  (db.prepare("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?").get(table) as { sql: string }).sql;

describe('R4.1 the replay index keyed by its identity on SQLite (0082)', function () {
  this.timeout(120_000);

  it('R4.1 given an old store, when it is opened, then its index rows are the same, in a WITHOUT ROWID table keyed by (identity, value), and it verifies', async () => {
    const path = oldStore('keyed-index');
    const old = new Database(path);
    const before = old.prepare(ROWS).all();
    expect(before).to.have.length(14);
    old.close();

    const a = await openSqliteStartBarrier({ path });
    const db = a.db as unknown as Database.Database;
    try {
      expect(tableSql(db)).to.match(/WITHOUT ROWID$/);
      expect(db.prepare(ROWS).all()).to.deep.equal(before);
      expect(db.prepare("SELECT name, \"unique\", origin FROM pragma_index_list('start_replay_identities')").all()).to.deep.equal([
        { name: 'sqlite_autoindex_start_replay_identities_1', unique: 1, origin: 'pk' },
      ]);
      expect((db.prepare("SELECT name FROM pragma_index_info('sqlite_autoindex_start_replay_identities_1')").all() as { name: string }[]).map((c) => c.name)).to.deep.equal([
        'identity',
        'value',
      ]);
      expect(db.prepare("SELECT \"from\", \"table\", \"to\" FROM pragma_foreign_key_list('start_replay_identities')").all()).to.deep.equal([
        { from: 'start_id', table: 'tool_execution_start_barriers', to: 'start_id' },
      ]);
      expect(() => db.prepare("UPDATE start_replay_identities SET value = 'x'").run()).to.throw(/immutable/);
      expect(() => db.prepare('DELETE FROM start_replay_identities').run()).to.throw(/immutable/);
      // the check on identity names is kept; since 0087 the trigger that requires a value its barrier holds refuses the row first
      expect(tableSql(db)).to.contain("CHECK (identity IN ('startId', 'mutationId', 'runEventId', 'traceId', 'auditEventId', 'auditReceiptId', 'attempt'))");
      expect(() => db.prepare("INSERT INTO start_replay_identities (identity, value, start_id) VALUES ('nonsense', 'v', ?)").run((before[0] as { start_id: string }).start_id)).to.throw(
        /CHECK constraint failed|a replay identity is a value its barrier holds/,
      );
      const report = await a.recovery.verify();
      expect(report.ok, JSON.stringify(report.problems)).to.equal(true);
      expect(report.checked.barriers).to.equal(2);
    } finally {
      await a.close();
    }
  });

  it('R4.1 given a start on the keyed index, when its identity value is used again, then the primary key refuses it; the exact replay returns the stored barrier', async () => {
    const a = await openSqliteStartBarrier({ path: freshDbPath('keyed-index-reuse') });
    const db = a.db as unknown as Database.Database;
    try {
      const s = await setUp(a);
      const command = s.startCommand();
      const first = await a.barriers.prepare(command);
      const [row] = db.prepare("SELECT identity, value FROM start_replay_identities WHERE identity = 'traceId'").all() as { identity: string; value: string }[];
      let code = '';
      try {
        db.prepare('INSERT INTO start_replay_identities (identity, value, start_id) VALUES (?, ?, ?)').run(row!.identity, row!.value, command.startId);
      } catch (e) {
        code = (e as { code: string }).code;
      }
      expect(code).to.equal('SQLITE_CONSTRAINT_PRIMARYKEY');
      const again = await a.barriers.prepare(command);
      expect(again.outcome).to.equal('existing');
      expect(JSON.stringify(again.barrier)).to.equal(JSON.stringify(first.barrier));
    } finally {
      await a.close();
    }
  });

  it('R4.1 given a store taken back to before 0082 (the history undo), when it is opened again, then it moves forward and verifies', async () => {
    const path = freshDbPath('keyed-index-undo');
    let a = await openSqliteStartBarrier({ path });
    const s = await setUp(a);
    await a.barriers.prepare(s.startCommand());
    const db = a.db as unknown as Database.Database;
    const before = db.prepare(ROWS).all();
    db.exec(UNDO_KEYED_INDEX);
    expect(tableSql(db)).to.not.match(/WITHOUT ROWID/);
    expect(db.prepare(ROWS).all()).to.deep.equal(before);
    await a.close();
    a = await openSqliteStartBarrier({ path });
    try {
      expect(tableSql(a.db as unknown as Database.Database)).to.match(/WITHOUT ROWID$/);
      expect((a.db as unknown as Database.Database).prepare(ROWS).all()).to.deep.equal(before);
      const report = await a.recovery.verify();
      expect(report.ok, JSON.stringify(report.problems)).to.equal(true);
    } finally {
      await a.close();
    }
  });

  for (const [what, damage] of [
    ['two rows under one identity value (its unique index dropped)', "DROP INDEX start_replay_identities_key; INSERT INTO start_replay_identities SELECT identity, value, start_id FROM start_replay_identities WHERE identity = 'traceId' LIMIT 1"],
    ['a row whose barrier is missing', "PRAGMA foreign_keys = OFF; INSERT INTO start_replay_identities (identity, value, start_id) VALUES ('traceId', 'trace-ghost', 'start-ghost')"],
  ] as const) {
    it(`given an old store holding ${what}, when it is opened, then the migration refuses it and the store is left as it was`, async () => {
      const path = oldStore(`keyed-index-refused-${what.length}`);
      const old = new Database(path);
      old.exec(damage);
      const rows = old.prepare(ROWS).all();
      old.close();
      const error = await rejects(openSqliteStartBarrier({ path }));
      expect(String(error)).to.contain('a_replay_identity_is_not_one_row_with_its_barrier');
      const again = new Database(path, { readonly: true });
      try {
        expect((again.prepare("SELECT count(*) AS n FROM schema_migrations WHERE name >= '0082'").get() as { n: number }).n).to.equal(0);
        expect(tableSql(again)).to.not.match(/WITHOUT ROWID/);
        expect(again.prepare(ROWS).all()).to.deep.equal(rows);
      } finally {
        again.close();
      }
    });
  }
});

describe('R9.1 start_whole_at_commit keyed by its start id on SQLite (0083)', function () {
  this.timeout(120_000);
  const WHOLE = 'SELECT start_id FROM start_whole_at_commit ORDER BY start_id';

  it('R9.1 given an old store, when it is opened, then the same rows are in a WITHOUT ROWID table with the deferred foreign key, and it verifies', async () => {
    const path = oldStore('whole-keyed', '0083');
    const old = new Database(path);
    const before = old.prepare(WHOLE).all();
    expect(before).to.have.length(2);
    old.close();
    const a = await openSqliteStartBarrier({ path });
    const db = a.db as unknown as Database.Database;
    try {
      expect(tableSql(db, 'start_whole_at_commit')).to.match(/DEFERRABLE INITIALLY DEFERRED\s*\) STRICT, WITHOUT ROWID$/);
      expect(db.prepare(WHOLE).all()).to.deep.equal(before);
      const report = await a.recovery.verify();
      expect(report.ok, JSON.stringify(report.problems)).to.equal(true);
    } finally {
      await a.close();
    }
  });

  it('R9.1 given the keyed table, when a fact of a start is committed without its barrier, then COMMIT fails and nothing is kept', async () => {
    const a = await openSqliteStartBarrier({ path: freshDbPath('whole-keyed-commit') });
    const db = a.db as unknown as Database.Database;
    try {
      // the fact row alone is refused at once: it has no event of its own (0088); past that
      // check (dropped here), the start is still not whole at commit (0083)
      const alone = db.prepare('INSERT INTO security_audit_events (audit_event_id, start_id, run_id, step_run_id, audit_event_digest, committed_at_ms) VALUES (?, ?, ?, ?, ?, ?)');
      expect(() => alone.run('audit-alone', 'start-alone', 'run-x', 'step-x', 'sha256:0', 1)).to.throw(/no event of its own/);
      db.exec('DROP TRIGGER security_audit_events_beside_their_event');
      db.exec('BEGIN');
      db.prepare('INSERT INTO security_audit_events (audit_event_id, start_id, run_id, step_run_id, audit_event_digest, committed_at_ms) VALUES (?, ?, ?, ?, ?, ?)').run(
        'audit-alone',
        'start-alone',
        'run-x',
        'step-x',
        'sha256:0',
        1,
      );
      expect(() => db.exec('COMMIT')).to.throw(/FOREIGN KEY constraint failed/);
      if (db.inTransaction) db.exec('ROLLBACK');
      expect(db.prepare('SELECT count(*) AS n FROM security_audit_events').get()).to.deep.equal({ n: 0 });
      expect(db.prepare(WHOLE).all()).to.deep.equal([]);
    } finally {
      await a.close();
    }
  });

  it('R9.1 given a store taken back to before 0083 (the history undo), when it is opened again, then it moves forward and verifies', async () => {
    const path = freshDbPath('whole-keyed-undo');
    let a = await openSqliteStartBarrier({ path });
    const s = await setUp(a);
    await a.barriers.prepare(s.startCommand());
    const db = a.db as unknown as Database.Database;
    const before = db.prepare(WHOLE).all();
    expect(before).to.have.length(1);
    db.exec(UNDO_WHOLE_START_KEYED);
    expect(tableSql(db, 'start_whole_at_commit')).to.not.match(/WITHOUT ROWID/);
    await a.close();
    a = await openSqliteStartBarrier({ path });
    try {
      expect(tableSql(a.db as unknown as Database.Database, 'start_whole_at_commit')).to.match(/WITHOUT ROWID$/);
      expect((a.db as unknown as Database.Database).prepare(WHOLE).all()).to.deep.equal(before);
      expect((await a.recovery.verify()).ok).to.equal(true);
    } finally {
      await a.close();
    }
  });

  it('given an old store holding a row whose barrier is missing, when it is opened, then the migration refuses it and the store is left as it was', async () => {
    const path = oldStore('whole-keyed-refused', '0083');
    const old = new Database(path);
    old.exec("PRAGMA foreign_keys = OFF; INSERT INTO start_whole_at_commit (start_id) VALUES ('start-ghost')");
    const rows = old.prepare(WHOLE).all();
    old.close();
    const error = await rejects(openSqliteStartBarrier({ path }));
    expect(String(error)).to.contain('a_whole_start_row_without_its_barrier');
    const again = new Database(path, { readonly: true });
    try {
      expect((again.prepare("SELECT count(*) AS n FROM schema_migrations WHERE name >= '0083'").get() as { n: number }).n).to.equal(0);
      expect(tableSql(again, 'start_whole_at_commit')).to.not.match(/WITHOUT ROWID/);
      expect(again.prepare(WHOLE).all()).to.deep.equal(rows);
    } finally {
      again.close();
    }
  });
});
