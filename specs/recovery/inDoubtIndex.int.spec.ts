import { expect } from 'chai';
import type Database from 'better-sqlite3';
import { IN_DOUBT_PAGE as SQLITE_PAGE } from '../../infrastructure/sqlite/recoverySql';
import { IN_DOUBT_PAGE as PG_PAGE } from '../../infrastructure/postgres/postgresRecoveryView';
import type { SqliteStartBarrier } from '../../infrastructure/sqlite';
import { withTriggersDropped } from '../../testkit/damage';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { migratedDbPath, openFreshSqlite } from '../sqlite/support';
import { startedScenario } from './recoveryConformance';
import { eachFreshPostgres, expectCorrupt } from './support';

// The in-doubt index (0092): a page of the listing (`inDoubt({ limit })`) reads the
// projection of starts with no outcome through an index in listing order, so it costs the rows
// it lists. Plans are asserted, never timings (bench/inDoubt.ts has the figures). The database
// keeps the index with the barrier and outcome rows; a page fails closed on what it reads
// (R9.3) and `verify` re-derives the index from the log (R9.2).

const ids = (list: readonly { startId: string }[]) => list.map((d) => d.startId);

describe('in-doubt index on SQLite (0092)', function () {
  this.timeout(60_000);
  let a: SqliteStartBarrier;
  beforeEach(async () => {
    a = await openFreshSqlite();
  });
  afterEach(() => a.close());

  it('R9.3 every page statement reads an in_doubt_starts index in listing order: no table scan, no sort (EXPLAIN QUERY PLAN)', () => {
    const expected = { store: 'in_doubt_starts_listing', project: 'in_doubt_starts_project', run: 'in_doubt_starts_run', projectRun: 'in_doubt_starts_run' } as const;
    for (const [scope, sql] of Object.entries(SQLITE_PAGE)) {
      const params = { cutoff_ms: 1, limit: 3, ...(scope.includes('roject') ? { project_id: 'p' } : {}), ...(scope === 'run' || scope === 'projectRun' ? { run_id: 'r' } : {}) };
      const plan = (a.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(params) as { detail: string }[]).map((r) => r.detail);
      expect(plan.join(' | '), scope).to.match(new RegExp(`USING (COVERING )?INDEX ${expected[scope as keyof typeof expected]}\\b`));
      expect(plan.join(' | '), scope).not.to.match(/TEMP B-TREE|SCAN in_doubt_starts$/);
    }
  });

  it('R9.3 a page lists the oldest starts with no outcome, as the whole listing does; a resolved start leaves the index in its transaction', async () => {
    const started = [];
    for (let i = 0; i < 4; i++) started.push(await startedScenario(a));
    const all = ids(await a.recovery.inDoubt());
    expect(ids(await a.recovery.inDoubt({ limit: 2 }))).to.deep.equal(all.slice(0, 2));
    expect(ids(await a.recovery.inDoubt({ limit: 10 }))).to.deep.equal(all);
    expect(ids(await a.recovery.inDoubt({ limit: 10, runId: started[2]!.s.runId }))).to.deep.equal([started[2]!.startId]);
    expect(ids(await a.recovery.inDoubt({ limit: 10, projectId: started[1]!.s.projectId }))).to.deep.equal(ids(await a.recovery.inDoubt({ projectId: started[1]!.s.projectId })));
    await a.recovery.resolve(all[0]!, 'completed', { decidedBy: 'ops', reason: 'tool_succeeded' });
    expect((a.db.prepare('SELECT start_id FROM in_doubt_starts ORDER BY committed_at_ms, start_id').all() as { start_id: string }[]).map((r) => r.start_id)).to.deep.equal(all.slice(1));
    expect(ids(await a.recovery.inDoubt({ limit: 1 }))).to.deep.equal([all[1]]);
    expect((await a.recovery.verify()).ok).to.equal(true);
  });

  it('R9.1 the database keeps the index the image of the barriers and outcomes: a row added, changed or removed by hand is refused', async () => {
    const { startId, barrier } = await startedScenario(a);
    const b = barrier.record;
    expect(() => a.db.prepare('UPDATE in_doubt_starts SET committed_at_ms = 1 WHERE start_id = ?').run(startId)).to.throw(/illegal history refused/);
    expect(() => a.db.prepare('DELETE FROM in_doubt_starts WHERE start_id = ?').run(startId)).to.throw(/illegal history refused/);
    expect(() => a.db.prepare('INSERT INTO in_doubt_starts VALUES (?, ?, ?, 1)').run('nope', b.projectId, b.runId)).to.throw(/illegal history refused|FOREIGN KEY/);
    expect(ids(await a.recovery.inDoubt({ limit: 5 }))).to.deep.equal([startId]);
  });

  it('R9.3 a page fails closed on an index row its barrier does not back, or a running start the index lost; verify reports both (R9.2)', async () => {
    const { startId } = await startedScenario(a);
    const index = (t: { tbl_name: string }) => t.tbl_name === 'in_doubt_starts';
    withTriggersDropped(a.db as Database.Database, index, () => a.db.prepare('UPDATE in_doubt_starts SET committed_at_ms = committed_at_ms - 1 WHERE start_id = ?').run(startId));
    await expectCorrupt('page, changed row', a.recovery.inDoubt({ limit: 5 }));
    expect((await a.recovery.verify()).problems.map((p) => p.record)).to.include(startId);
    withTriggersDropped(a.db as Database.Database, index, () => a.db.prepare('DELETE FROM in_doubt_starts WHERE start_id = ?').run(startId));
    await expectCorrupt('page, row gone', a.recovery.inDoubt({ limit: 5 }));
    const report = await a.recovery.verify();
    expect(report.ok).to.equal(false);
    expect(report.problems.find((p) => p.record === startId)?.problem).to.match(/in-doubt index does not list it/);
    // the unlimited listing starts from the barriers, not the index: the start is still there
    expect(ids(await a.recovery.inDoubt())).to.deep.equal([startId]);
  });

  it('R9.3 R9.4 a keyed page reads only what it lists: an outcome appended without the key on another Run fails the whole listing and verify, and leaves the page its rows', async () => {
    const path = await migratedDbPath();
    const keyed = await openSqliteStartBarrier({ path, evidenceKeys: { active: { id: 'k1', secret: Buffer.alloc(32, 0x3c) } } });
    const forger = await openSqliteStartBarrier({ path });
    try {
      const listed = await startedScenario(keyed);
      const hidden = await startedScenario(keyed);
      // a legal outcome the database accepts, written with INSERT rights and no key: it takes
      // the start off the index
      await forger.runs.handle({ type: 'CompleteStepRun', data: { runId: hidden.s.runId, stepRunId: hidden.s.stepRunId, decidedBy: 'intruder', reason: 'tool_succeeded', requestedAtMs: 2 } });
      expect(ids(await keyed.recovery.inDoubt({ limit: 10 }))).to.deep.equal([listed.startId]);
      await expectCorrupt('the whole listing reads every Run with an outcome', keyed.recovery.inDoubt());
      const report = await keyed.recovery.verify();
      expect(report.problems.filter((p) => p.kind === 'event_seal' && p.record.startsWith(`run-${hidden.s.runId}@`))).to.have.length(1);
    } finally {
      await forger.close();
      await keyed.close();
    }
  });
});

describe('in-doubt index on PostgreSQL', function () {
  this.timeout(120_000);
  const on = eachFreshPostgres();

  it('R9.3 every page statement is an index scan of in_doubt_starts in listing order: no seq scan, no sort (EXPLAIN)', async () => {
    // a crash storm's shape (many in doubt per Project and per Run), with statistics for the planner
    await on.db.admin((c) =>
      c.query(`SET session_replication_role = replica;
        INSERT INTO ql3.in_doubt_starts SELECT 's' || g, 'p' || (g % 5), 'r' || (g % 10), g FROM generate_series(1, 20000) g;
        SET session_replication_role = origin; ANALYZE ql3.in_doubt_starts`),
    );
    const expected = { store: 'in_doubt_starts_listing', project: 'in_doubt_starts_project', run: 'in_doubt_starts_run', projectRun: 'in_doubt_starts_run' } as const;
    for (const [scope, sql] of Object.entries(PG_PAGE)) {
      const values = sql.names.map((n) => ({ cutoff_ms: String(Number.MAX_SAFE_INTEGER), limit: '100', project_id: 'p2', run_id: 'r7' })[n]);
      const plan = await on.db.admin(async (c) => (await c.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql.text}`, values)).rows.map((r) => r['QUERY PLAN']).join('\n'));
      expect(plan, scope).to.match(new RegExp(`Index (Only )?Scan using ${expected[scope as keyof typeof expected]} on in_doubt_starts`));
      expect(plan, scope).not.to.match(/Seq Scan|Sort/);
    }
  });

  it('R9.1 no product role can write the index; a page lists what the whole listing lists, and a resolved start leaves it', async () => {
    const rights = await on.db.admin(async (c) =>
      (
        await c.query<{ role: string; w: boolean; sel: boolean }>(
          `SELECT r AS role, has_table_privilege(r, 'ql3.in_doubt_starts', 'INSERT, UPDATE, DELETE, TRUNCATE') AS w, has_table_privilege(r, 'ql3.in_doubt_starts', 'SELECT') AS sel
             FROM unnest(ARRAY['ql3_runtime', 'ql3_admin', 'ql3_reader']) AS r`,
        )
      ).rows,
    );
    for (const r of rights) expect({ w: r.w, sel: r.sel }, r.role).to.deep.equal({ w: false, sel: true });
    for (let i = 0; i < 3; i++) await startedScenario(on.a);
    const all = ids(await on.a.recovery.inDoubt());
    expect(ids(await on.a.recovery.inDoubt({ limit: 2 }))).to.deep.equal(all.slice(0, 2));
    await on.a.recovery.resolve(all[0]!, 'lost', { decidedBy: 'ops', reason: 'worker_lost' });
    expect(ids(await on.a.recovery.inDoubt({ limit: 10 }))).to.deep.equal(all.slice(1));
    expect((await on.a.recovery.verify()).ok).to.equal(true);
  });

  it('R9.3 a page fails closed on an index row its barrier does not back, or a running start the index lost; verify reports both (R9.2)', async () => {
    const { startId } = await startedScenario(on.a);
    await on.db.admin((c) => c.query("SET session_replication_role = replica; UPDATE ql3.in_doubt_starts SET committed_at_ms = committed_at_ms - 1; SET session_replication_role = origin"));
    await expectCorrupt('page, changed row', on.a.recovery.inDoubt({ limit: 5 }));
    expect((await on.a.recovery.verify()).problems.map((p) => p.record)).to.include(startId);
    await on.db.admin((c) => c.query('DELETE FROM ql3.in_doubt_starts'));
    await expectCorrupt('page, row gone', on.a.recovery.inDoubt({ limit: 5 }));
    const report = await on.a.recovery.verify();
    expect(report.problems.find((p) => p.record === startId)?.problem).to.match(/in-doubt index does not list it/);
  });
});
