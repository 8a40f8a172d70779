import { expect } from 'chai';
import Database from 'better-sqlite3';
import { CorruptRecordError, type LifecycleCommand } from '../../domain';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { openPostgresStartBarrier } from '../../infrastructure/postgres/postgresAuthority';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { MigratedTemplate, type TestDatabase } from '../../testkit/postgresHarness';
import { freshDbPath } from '../support/tmp';
import { buildOnce, runCli } from '../cli/cliSuite';
import { rejects, startedScenario } from './recoveryConformance';

// R9.3 past the row: damage that removes a table or a column, a value no row of its kind can
// hold, or a row a write references. Every read and write answers with the typed error, never
// a raw driver error, and `verify` reports the damage and goes on, never throws for it.

const completion = (s: { runId: string; stepRunId: string }): LifecycleCommand => ({
  type: 'CompleteStepRun',
  data: { runId: s.runId, stepRunId: s.stepRunId, decidedBy: 'spec', reason: 'tool_succeeded', requestedAtMs: 2 },
});

const expectCorrupt = async (what: string, p: Promise<unknown>): Promise<void> => {
  const e = await rejects(p);
  expect(e instanceof CorruptRecordError, `${what}: ${e.constructor.name} ${e.message}`).to.equal(true);
};

describe('R9.3 damage past the row is typed on SQLite: a table gone, a referenced row gone', function () {
  this.timeout(120_000);

  /** A store with one start in doubt, damaged through a connection of the owner's own. */
  const damaged = async (sql: string): Promise<{ path: string; startId: string; s: { runId: string; stepRunId: string } }> => {
    const path = freshDbPath();
    const a = await openSqliteStartBarrier({ path });
    const { s, startId } = await startedScenario(a);
    await a.close();
    const db = new Database(path);
    db.pragma('foreign_keys = OFF');
    db.exec(sql.replaceAll(':start', `'${startId}'`));
    db.close();
    return { path, startId, s };
  };

  it('R9.3 verify reports a table gone (driver claims, resolution notes, capabilities) and checks the rest: it never throws for damage (CLI exit 5)', async () => {
    for (const table of ['adapter_driver_claims', 'resolution_notes', 'capabilities']) {
      const { path } = await damaged(`DROP TABLE ${table}`);
      const a = await openSqliteStartBarrier({ path });
      const report = await a.recovery.verify();
      expect(report.ok, table).to.equal(false);
      expect(report.problems.some((p) => p.problem.includes(table)), `${table}: ${JSON.stringify(report.problems)}`).to.equal(true);
      expect(report.checked.barriers, table).to.equal(1);
      expect(report.checked.events, table).to.be.greaterThan(0);
      await a.close();
      if (table === 'adapter_driver_claims') {
        buildOnce();
        expect((await runCli(['verify', '--db', path])).code).to.equal(5);
      }
    }
  });

  it('R9.3 a store whose table or column is gone opens as CORRUPT_RECORD, never a raw driver error; its driver claims likewise', async () => {
    for (const sql of ['DROP TABLE start_outcomes', 'DROP TABLE streams']) {
      const { path } = await damaged(sql);
      await expectCorrupt(sql, openSqliteStartBarrier({ path }));
    }
    const { path } = await damaged('DROP TABLE adapter_driver_claims');
    const a = await openSqliteStartBarrier({ path });
    expect(() => a.driverClaims()).to.throw(CorruptRecordError);
    await a.close();
  });

  it('R9.3 an outcome appended for a start whose barrier row is gone, or over an outcome row that stands without its event, is CORRUPT_RECORD and writes nothing', async () => {
    for (const sql of [
      'DROP TRIGGER tool_execution_start_barriers_no_delete; DELETE FROM tool_execution_start_barriers WHERE start_id = :start',
      `DROP TRIGGER start_outcomes_project_their_event; INSERT INTO start_outcomes SELECT start_id, run_id, step_run_id, 'completed', 'nobody', 'tool_succeeded', NULL, 99, 'no-such-event', 1, 1, 1
         FROM tool_execution_start_barriers WHERE start_id = :start`,
    ]) {
      const { path, s } = await damaged(sql);
      const a = await openSqliteStartBarrier({ path });
      const before = (a.db.prepare('SELECT count(*) AS n FROM events').get() as { n: number }).n;
      await expectCorrupt(sql.slice(0, 40), a.runs.handle(completion(s)));
      expect((a.db.prepare('SELECT count(*) AS n FROM events').get() as { n: number }).n).to.equal(before);
      await a.close();
    }
  });
});

describe('R9.3 damage past the row is typed on PostgreSQL: a value no row can hold, a referenced row gone', function () {
  this.timeout(120_000);
  const template = new MigratedTemplate();
  let db: TestDatabase;
  let a: RecoverableStartBarrierAuthority & { close(): Promise<void> };
  after(() => template.dropAll());
  beforeEach(async () => {
    db = await template.clone();
    a = await openPostgresStartBarrier({ connectionString: db.url });
  });
  afterEach(async () => {
    await a.close();
    await db.drop();
  });

  /** As the owner, past the append-only triggers and the foreign keys. */
  const damage = (sql: string) => db.admin((c) => c.query(`BEGIN; SET LOCAL session_replication_role = replica; ${sql}; COMMIT`));

  it('R9.3 verify reports a Run head whose version no row can hold, and a second damage after it: it never throws for damage (CLI exit 5)', async () => {
    const one = await startedScenario(a);
    const two = await startedScenario(a);
    await damage(`UPDATE ql3.runs SET version = 9007199254740993 WHERE run_id = '${one.s.runId}'; UPDATE ql3.trace_anchors SET trace_digest = 'sha256:${'0'.repeat(64)}' WHERE start_id = '${two.startId}'`);
    const report = await a.recovery.verify();
    expect(report.ok).to.equal(false);
    expect(report.problems.some((p) => p.record === two.startId), JSON.stringify(report.problems)).to.equal(true);
    expect(report.problems.some((p) => p.problem.includes(one.s.runId) || p.record.includes(one.s.runId)), JSON.stringify(report.problems)).to.equal(true);
    buildOnce();
    expect((await runCli(['verify', '--postgres', db.url])).code).to.equal(5);
  });

  it('R9.3 an outcome appended for a start whose barrier row is gone, or over an outcome row that stands without its event, is CORRUPT_RECORD and writes nothing', async () => {
    const gone = await startedScenario(a);
    await damage(`DELETE FROM ql3.tool_execution_start_barriers WHERE start_id = '${gone.startId}'`);
    const stray = await startedScenario(a);
    await damage(`INSERT INTO ql3.start_outcomes SELECT start_id, run_id, step_run_id, 'completed', 'nobody', 'tool_succeeded', NULL, 99, 'no-such-event', 1, 1, 1
      FROM ql3.tool_execution_start_barriers WHERE start_id = '${stray.startId}'`);
    for (const { s } of [gone, stray]) {
      const before = await db.admin(async (c) => (await c.query('SELECT count(*)::int AS n FROM ql3.events')).rows[0].n as number);
      await expectCorrupt(s.runId, a.runs.handle(completion(s)));
      expect(await db.admin(async (c) => (await c.query('SELECT count(*)::int AS n FROM ql3.events')).rows[0].n as number)).to.equal(before);
    }
  });
});
