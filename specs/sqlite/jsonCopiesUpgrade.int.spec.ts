import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { IDENTITY_START_IDS } from '../../infrastructure/sqlite/recoverySql';
import { openFreshSqlite } from './support';
import { migrateUpTo } from './migrateUpTo';
import { loadMigrations } from '../../infrastructure/migrations';
import { freshDbPath } from '../support/tmp';

// Each fact stored once (0080): an old store, written by the code of its time (the legacy
// fixture), is migrated to just before 0080, its schema noted, and then opened by this code.
// Its rows move forward without their JSON copies (which equalled the event data), every
// trigger and index on a rebuilt table is there again, the nine repeated unique constraints
// are gone, and the store verifies.

const FIXTURE = join(__dirname, '..', 'fixtures', 'legacy-store-before-r10.2.sqlite.gz');
const REBUILT = ['security_audit_events', 'trace_anchors', 'audit_receipts', 'step_run_mutations', 'tool_execution_start_barriers'];
const JSON_COPIES = ['event_json', 'anchor_json', 'receipt_json', 'mutation_json', 'barrier_json'];

interface SchemaObject {
  type: string;
  name: string;
  tbl_name: string;
  sql: string | null;
}

const schemaOf = (db: Database.Database): SchemaObject[] =>
  db.prepare("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE type IN ('index', 'trigger') ORDER BY name").all() as SchemaObject[];

/** The unique indexes of a table, as their column lists. */
const uniqueKeysOf = (db: Database.Database, table: string): string[] =>
  (db.prepare(`SELECT name FROM pragma_index_list('${table}') WHERE "unique" = 1`).all() as { name: string }[])
    .map(({ name }) => (db.prepare('SELECT name FROM pragma_index_info(?)').all(name) as { name: string }[]).map((c) => c.name).join(','))
    .sort();


/** The triggers the migrations after `after` create again (each DROPs and CREATEs one by name). */
const redefinedLater = (after: string): Set<string> =>
  new Set(loadMigrations('sqlite').filter((m) => m.name > after && !m.name.startsWith(after)).flatMap((m) => [...m.sql.matchAll(/CREATE TRIGGER (?:IF NOT EXISTS )?([a-z_0-9]+)/gi)].map((x) => x[1]!)));

describe('each fact stored once on SQLite (0080)', function () {
  this.timeout(120_000);

  it('an old store moves forward: no JSON copies, no repeated unique constraints, every trigger and index on a rebuilt table recreated, and it verifies', async () => {
    const path = freshDbPath('stored-once');
    writeFileSync(path, gunzipSync(readFileSync(FIXTURE)));
    const old = new Database(path);
    migrateUpTo(old, '0080');
    const before = schemaOf(old);
    const rowsBefore = Object.fromEntries(REBUILT.map((t) => [t, old.prepare(`SELECT * FROM ${t} ORDER BY rowid`).all() as Record<string, unknown>[]]));
    expect(rowsBefore.tool_execution_start_barriers!.length).to.equal(2);
    expect(uniqueKeysOf(old, 'tool_execution_start_barriers')).to.have.length(7);
    old.close();

    const a = await openSqliteStartBarrier({ path });
    const db = a.db as unknown as Database.Database;
    try {
      const after = schemaOf(db);
      // every trigger, on any table, is there again with the same definition
      // (a trigger a later migration redefines is there by name: retention's delete guards, R14.2)
      const later = redefinedLater('0080');
      const triggers = (objects: SchemaObject[]) => objects.filter((o) => o.type === 'trigger' && !later.has(o.name)).map((o) => [o.name, o.tbl_name, o.sql]);
      expect(triggers(after)).to.include.deep.members(triggers(before));
      const names = (objects: SchemaObject[]) => objects.filter((o) => o.type === 'trigger').map((o) => o.name);
      expect(names(after)).to.include.members(names(before));
      // every index the migrations declared is there again; the autoindexes of the repeated unique constraints are gone
      const declared = (objects: SchemaObject[]) => objects.filter((o) => o.type === 'index' && o.sql !== null).map((o) => [o.name, o.tbl_name, o.sql]);
      // (but the replay index's start_id index, which 0081 drops: the compact replay index; and its
      // unique index, which 0082 makes the primary key of the table: keyedTables.int.spec.ts)
      expect(declared(after)).to.deep.include.members(declared(before).filter(([name]) => name !== 'start_replay_identities_start' && name !== 'start_replay_identities_key'));
      expect(declared(after).map(([name]) => name)).to.include('tool_execution_start_barriers_attempt');
      expect(uniqueKeysOf(db, 'tool_execution_start_barriers')).to.deep.equal(['start_id']);
      expect(uniqueKeysOf(db, 'audit_receipts')).to.deep.equal(['audit_receipt_id']);
      expect(uniqueKeysOf(db, 'step_run_mutations')).to.deep.equal(['mutation_id']);
      expect(uniqueKeysOf(db, 'security_audit_events')).to.deep.equal(['audit_event_id']);
      expect(uniqueKeysOf(db, 'trace_anchors')).to.deep.equal(['trace_id']);
      // the rows moved forward, less their JSON copies, in order
      for (const [i, table] of REBUILT.entries()) {
        const now = db.prepare(`SELECT * FROM ${table} ORDER BY rowid`).all() as Record<string, unknown>[];
        const want = rowsBefore[table]!.map(({ [JSON_COPIES[i]!]: _, ...rest }) => rest);
        expect(now, table).to.deep.equal(want);
      }
      expect(db.pragma('foreign_key_check')).to.deep.equal([]);
      const report = await a.recovery.verify();
      expect(report.ok, JSON.stringify(report.problems)).to.equal(true);
      expect(report.checked.barriers).to.equal(2);
      expect((await a.barriers.getByStartId('start-legacy-annotated-v3'))?.record.annotations).to.not.equal(undefined);
    } finally {
      await a.close();
    }
  });

  it('a store whose JSON copy differs from its event is refused, not migrated (the evidence of the difference is kept)', async () => {
    const path = freshDbPath('stored-once-differs');
    writeFileSync(path, gunzipSync(readFileSync(FIXTURE)));
    const old = new Database(path);
    migrateUpTo(old, '0080');
    old.exec('DROP TRIGGER trace_anchors_no_update');
    old.exec(`UPDATE trace_anchors SET anchor_json = anchor_json || ' ' WHERE rowid = 1`);
    old.close();
    let error: unknown;
    try {
      await (await openSqliteStartBarrier({ path })).close();
    } catch (e) {
      error = e;
    }
    expect(String(error)).to.contain('a_stored_json_differs_from_its_event');
    const again = new Database(path, { readonly: true });
    expect((again.prepare("SELECT count(*) AS n FROM schema_migrations WHERE name >= '0080'").get() as { n: number }).n).to.equal(0);
    again.close();
  });

  it('R6.4 every lookup of one identity stays an index probe with the repeated unique constraints gone (the recovery lookup reads keyed rows)', async () => {
    const a = await openFreshSqlite();
    try {
      const db = a.db as unknown as Database.Database;
      const args = { identity: 'x', key: 'x', run_id: 'x', step_run_id: 'x', version: 1 };
      for (const [identity, sql] of Object.entries(IDENTITY_START_IDS)) {
        const plan = (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(args) as { detail: string }[]).map((r) => r.detail);
        for (const step of plan) expect(step, `${identity}: ${plan.join(' / ')}`).to.not.match(/^SCAN /);
      }
    } finally {
      await a.close();
    }
  });
});
