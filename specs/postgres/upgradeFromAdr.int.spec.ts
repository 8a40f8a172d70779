import { expect } from 'chai';
import type { Client } from 'pg';
import { openPostgresStartBarrier } from '../../infrastructure/postgres/postgresAuthority';
import { loadMigrations, UnreleasedStoreError } from '../../infrastructure/migrations';
import { migratePostgres } from '../../infrastructure/postgres/migrate';
import { normaliseOutcomeRow, rebuildOutcomeRows } from '../../projections/outcomeRows';
import { MigratedTemplate, createDatabase, type TestDatabase } from '../../testkit/postgresHarness';
import { rejects, startedScenario } from '../recovery/recoveryConformance';
import { rawPostgres } from '../recovery/support';

// A store at the ADR's schema (pg-0001 .. pg-0030) with data moves to today's schema in one
// step (pg-0031-start-barrier-schema): the JSON copies proven equal to their events and dropped,
// the event chain, the outcome and in-doubt read models and the ledger digests filled from what
// is stored. The rows are those a start writes, put into the tables as pg-0030 shapes them.
// A store written by an unreleased version (its ledger names a migration never shipped) has no
// upgrade path: it is refused with a typed error and nothing is written.

const ADR = loadMigrations('postgres').filter((m) => m.name < 'pg-0031');
const TABLE_ORDER = ['streams', 'runs', 'step_runs', 'events', 'security_audit_events', 'trace_anchors', 'audit_receipts', 'step_run_mutations', 'tool_execution_start_barriers', 'start_replay_identities'] as const;

/** Each stored row of today's store, as pg-0030 keeps it: with the JSON copies and the identities' command digest. */
const adrRowsOf = async (c: Client): Promise<Record<string, Record<string, unknown>[]>> => {
  const q = async (sql: string) => (await c.query(sql)).rows as Record<string, unknown>[];
  return {
    streams: await q('SELECT stream_id, stream_type, version FROM ql3.streams'),
    runs: await q('SELECT run_id, project_id, snapshot_id, snapshot_digest, version FROM ql3.runs'),
    step_runs: await q('SELECT run_id, step_run_id, project_id, kind, status, version, digest, state_json FROM ql3.step_runs'),
    events: await q('SELECT stream_id, stream_position, event_id, event_type, data_json, committed_at_ms FROM ql3.events ORDER BY global_position'),
    security_audit_events: await q("SELECT o.*, e.data_json AS event_json FROM ql3.security_audit_events o JOIN ql3.events e ON e.event_id = 'audit:' || o.audit_event_id"),
    trace_anchors: await q("SELECT o.*, e.data_json AS anchor_json FROM ql3.trace_anchors o JOIN ql3.events e ON e.event_id = 'trace:' || o.trace_id"),
    audit_receipts: await q("SELECT o.*, e.data_json AS receipt_json FROM ql3.audit_receipts o JOIN ql3.events e ON e.event_id = 'receipt:' || o.audit_receipt_id"),
    step_run_mutations: await q('SELECT o.*, e.data_json AS mutation_json FROM ql3.step_run_mutations o JOIN ql3.events e ON e.event_id = o.run_event_id'),
    tool_execution_start_barriers: await q("SELECT o.*, (e.data_json::json -> 'barrier')::text AS barrier_json FROM ql3.tool_execution_start_barriers o JOIN ql3.events e ON e.event_id = 'barrier:' || o.start_id"),
    // pg-0030's replay index: seven rows per barrier, each repeating its command digest
    start_replay_identities: await q(`SELECT k.identity, k.value, b.start_id, b.command_digest FROM ql3.tool_execution_start_barriers b
      CROSS JOIN LATERAL (VALUES ('startId', b.start_id), ('mutationId', b.mutation_id), ('runEventId', b.run_event_id), ('traceId', b.trace_id),
        ('auditEventId', b.audit_event_id), ('auditReceiptId', b.audit_receipt_id),
        ('attempt', '[' || to_json(b.run_id)::text || ',' || to_json(b.step_run_id)::text || ',' || b.started_step_run_version || ']')) k (identity, value)`),
  };
};

const insertAll = async (c: Client, rows: Record<string, Record<string, unknown>[]>): Promise<void> => {
  await c.query('BEGIN');
  await c.query('SET CONSTRAINTS ALL DEFERRED');
  for (const table of TABLE_ORDER) {
    for (const row of rows[table]!) {
      const columns = Object.keys(row);
      await c.query(`INSERT INTO ql3.${table} (${columns.join(', ')}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')})`, Object.values(row));
    }
  }
  await c.query('COMMIT');
};

describe('upgrade from the ADR schema (pg-0030) on PostgreSQL', function () {
  this.timeout(120_000);
  const template = new MigratedTemplate();
  const dbs: TestDatabase[] = [];
  after(async () => {
    for (const db of dbs) await db.drop();
    await template.dropAll();
  });

  it('R5.2, R9.2 a pg-0030 store with starts (one resolved, one in doubt) moves to today in one migration and verifies', async () => {
    const source = await template.clone();
    dbs.push(source);
    const a = await openPostgresStartBarrier({ connectionString: source.url });
    const lost = await startedScenario(a);
    await a.recovery.resolve(lost.startId, 'lost', { decidedBy: 'ops', reason: 'worker_lost' });
    const open = await startedScenario(a);
    const stored = (await rawPostgres(a)).outcomes;
    await a.close();
    const rows = await source.admin(adrRowsOf);

    const db = await createDatabase();
    dbs.push(db);
    await db.admin(async (c) => {
      await migratePostgres(c, ADR, { checkObjects: false });
      await insertAll(c, rows);
    });
    const upgraded = await openPostgresStartBarrier({ connectionString: db.url });
    try {
      const applied = await db.admin(async (c) => (await c.query<{ name: string }>('SELECT name FROM ql3.schema_migrations ORDER BY name')).rows.map((r) => r.name));
      expect(applied).to.deep.equal(loadMigrations('postgres').map((m) => m.name));
      const raw = await rawPostgres(upgraded);
      expect(raw.outcomes.map(normaliseOutcomeRow)).to.deep.equal(stored.map(normaliseOutcomeRow));
      expect(raw.outcomes.map(normaliseOutcomeRow)).to.deep.equal(rebuildOutcomeRows(raw.events));
      expect((await upgraded.recovery.inDoubt()).map((e) => e.startId)).to.deep.equal([open.startId]);
      const report = await upgraded.recovery.verify();
      expect(report.ok, JSON.stringify(report.problems)).to.equal(true);
      expect(report.checked.barriers).to.equal(2);
      // an exact replay answers from the upgraded rows; a new start is written on them
      expect((await upgraded.barriers.prepare(open.s.startCommand())).outcome).to.equal('existing');
      expect((await startedScenario(upgraded)).barrier.record.startId).to.be.a('string');
      expect((await upgraded.recovery.verify()).ok).to.equal(true);
    } finally {
      await upgraded.close();
    }
  });

  it('a store whose JSON copy differs from its event is refused, and nothing is applied', async () => {
    const source = await template.clone();
    dbs.push(source);
    const a = await openPostgresStartBarrier({ connectionString: source.url });
    await startedScenario(a);
    await a.close();
    const rows = await source.admin(adrRowsOf);
    rows.trace_anchors![0]!.anchor_json = '{"changed":true}';
    const db = await createDatabase();
    dbs.push(db);
    await db.admin(async (c) => {
      await migratePostgres(c, ADR, { checkObjects: false });
      await insertAll(c, rows);
    });
    const error = await rejects(openPostgresStartBarrier({ connectionString: db.url }));
    expect(error.message).to.contain('a_stored_copy_differs_from_its_source: trace anchor');
    const applied = await db.admin(async (c) => (await c.query<{ name: string }>('SELECT name FROM ql3.schema_migrations ORDER BY name')).rows.map((r) => r.name));
    expect(applied).to.deep.equal(ADR.map((m) => m.name));
  });

  it('a store written by an unreleased version is refused on open and on migrate, typed and naming its migration; nothing is written', async () => {
    const db = await template.clone();
    dbs.push(db);
    const unreleased = 'pg-0050-each-fact-stored-once';
    await db.admin((c) => c.query(`UPDATE ql3.schema_migrations SET name = $1 WHERE name = 'pg-0031-start-barrier-schema'`, [unreleased]));
    const ledger = () => db.admin(async (c) => (await c.query('SELECT name, checksum, applied_at_ms, ledger_digest FROM ql3.schema_migrations ORDER BY name')).rows);
    const before = await ledger();
    for (const attempt of [() => openPostgresStartBarrier({ connectionString: db.url }), () => db.admin((c) => migratePostgres(c))]) {
      const error = await rejects(attempt());
      expect(error, error.message).to.be.instanceOf(UnreleasedStoreError);
      expect((error as UnreleasedStoreError).migration).to.equal(unreleased);
      expect(error.message).to.contain(unreleased).and.to.contain('unreleased version').and.to.contain('recreated');
    }
    expect(await ledger()).to.deep.equal(before);
  });
});
