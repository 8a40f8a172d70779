import { expect } from 'chai';
import { openPostgresRetention, openPostgresStartBarrier } from '../../infrastructure/postgres';
import { compactionDigestOf } from '../../domain';
import { retentionSuite } from '../conformance/retentionConformance';
import { setUp } from '../conformance/startBarrierConformance';
import { buildOnce, json, runCli } from '../cli/cliSuite';
import { MigratedTemplate, testPool, type TestDatabase } from '../../testkit/postgresHarness';

const template = new MigratedTemplate();
after(() => template.dropAll());

retentionSuite({
  name: 'postgres',
  open: async () => {
    const db = await template.clone();
    const retention = await openPostgresRetention({ connectionString: db.url });
    return {
      authority: retention.authority,
      compact: (o) => retention.compact(o as { before: number }),
      close: async () => {
        await retention.close();
        await db.drop();
      },
    };
  },
});

describe('R14.2 retention on PostgreSQL: only ql3_retention compacts, the function keeps the rule, tampering is detected', function () {
  this.timeout(120_000);
  const dbs: TestDatabase[] = [];
  afterEach(async () => {
    for (const db of dbs.splice(0)) await db.drop();
  });

  const finishedStore = async (runs: number) => {
    const db = await template.clone();
    dbs.push(db);
    const a = await openPostgresStartBarrier({ connectionString: db.url });
    const startIds: string[] = [];
    const runIds: string[] = [];
    for (let i = 0; i < runs; i += 1) {
      const s = await setUp(a);
      const c = s.startCommand();
      await a.barriers.prepare(c);
      await a.recovery.resolve(c.startId, 'completed', { decidedBy: 'retention-spec', reason: 'tool_succeeded' });
      startIds.push(c.startId);
      runIds.push(s.runId);
    }
    await a.close();
    return { db, startIds, runIds };
  };

  const refusals = async (url: string, role: string, statements: readonly (readonly [string, unknown[]])[]): Promise<number> => {
    const pool = testPool({ connectionString: url, options: `-c role=${role}`, max: 1 });
    let accepted = 0;
    try {
      for (const [sql, params] of statements) {
        try {
          await pool.query(sql, params);
          accepted += 1;
        } catch {
          // refused by the grants or the guards
        }
      }
    } finally {
      await pool.end();
    }
    return accepted;
  };

  it('R14.2 given the runtime role, when it calls the compaction function, deletes evidence or writes a compaction record, then each is refused and verify stays green', async () => {
    const { db, runIds } = await finishedStore(1);
    const accepted = await refusals(db.url, 'ql3_runtime', [
      ['SELECT ql3.compact_run($1, $2)', [JSON.stringify({ runId: runIds[0] }), `sha256:${'0'.repeat(64)}`]],
      ['DELETE FROM ql3.events', []],
      ['DELETE FROM ql3.tool_execution_start_barriers', []],
      ['DELETE FROM ql3.step_run_mutations', []],
      ['DELETE FROM ql3.runs', []],
      [`INSERT INTO ql3.run_compactions (run_id, record_json, compaction_digest) VALUES ('x', '{}', 'sha256:${'0'.repeat(64)}')`, []],
    ]);
    expect(accepted).to.equal(0);
    const a = await openPostgresStartBarrier({ connectionString: db.url });
    expect((await a.recovery.verify()).ok).to.equal(true);
    await a.close();
  });

  it('R14.2 given the retention role, when it calls the function with a record whose digest or rule is wrong, then the database refuses it and nothing is removed', async () => {
    const { db, runIds } = await finishedStore(1);
    const r = await openPostgresRetention({ connectionString: db.url });
    const run = runIds[0]!;
    const record = JSON.stringify({ runId: run, beforeMs: Date.now() + 3_600_000, finishedAtMs: 0, streamVersion: 0, barriers: [], identities: [] });
    const early = JSON.stringify({ runId: run, beforeMs: 1, finishedAtMs: 0, streamVersion: 0, barriers: [], identities: [] });
    const accepted = await refusals(db.url, 'ql3_retention', [
      ['SELECT ql3.compact_run($1, $2)', [record, `sha256:${'0'.repeat(64)}`]],
      ['SELECT ql3.compact_run($1, $2)', [early, compactionDigestOf(JSON.parse(early) as never)]],
      ['SELECT ql3.compact_run($1, $2)', [record, compactionDigestOf(JSON.parse(record) as never)]],
      ['DELETE FROM ql3.events', []],
    ]);
    expect(accepted).to.equal(0);
    expect((await r.authority.pool.query('SELECT count(*)::int AS n FROM ql3.run_compactions')).rows[0].n).to.equal(0);
    const report = await r.compact({ before: Date.now() + 3_600_000 });
    expect(report.compacted.map((c) => c.runId)).to.deep.equal([run]);
    await r.close();
  });

  it('R14.2 given many finished Runs, when they are compacted, then the tables are vacuumed, no row of them is left and verify is green', async () => {
    const { db } = await finishedStore(30);
    const r = await openPostgresRetention({ connectionString: db.url });
    const report = await r.compact({ before: Date.now() + 3_600_000 });
    expect(report.compacted).to.have.length(30);
    console.log(`      ql3 table bytes before/after compaction and VACUUM: ${report.tableBytes.before}/${report.tableBytes.after}`);
    const left = (await r.authority.pool.query('SELECT (SELECT count(*) FROM ql3.events) + (SELECT count(*) FROM ql3.tool_execution_start_barriers) + (SELECT count(*) FROM ql3.runs) AS n')).rows[0].n;
    expect(Number(left)).to.equal(0);
    const v = await r.authority.recovery.verify();
    expect(v.problems, JSON.stringify(v.problems)).to.deep.equal([]);
    await r.close();
  });

  it('R14.2 given a compacted Run, when its record or a kept identity is changed past the guards, then verify reports it', async () => {
    const { db } = await finishedStore(2);
    const r = await openPostgresRetention({ connectionString: db.url });
    await r.compact({ before: Date.now() + 3_600_000 });
    const admin = testPool({ connectionString: db.url, max: 1 });
    await admin.query('ALTER TABLE ql3.run_compactions DISABLE TRIGGER run_compactions_immutable');
    await admin.query('ALTER TABLE ql3.compacted_identities DISABLE TRIGGER compacted_identities_immutable');
    await admin.query(`UPDATE ql3.run_compactions SET record_json = jsonb_set(record_json::jsonb, '{beforeMs}', '1')::text WHERE run_id = (SELECT min(run_id) FROM ql3.run_compactions)`);
    await admin.query(`UPDATE ql3.compacted_identities SET command_digest = 'sha256:${'0'.repeat(64)}' WHERE (identity, value) IN (SELECT identity, value FROM ql3.compacted_identities LIMIT 1)`);
    await admin.query('ALTER TABLE ql3.run_compactions ENABLE TRIGGER run_compactions_immutable');
    await admin.query('ALTER TABLE ql3.compacted_identities ENABLE TRIGGER compacted_identities_immutable');
    await admin.end();
    const v = await r.authority.recovery.verify();
    expect(v.ok).to.equal(false);
    expect(v.problems.map((p) => p.kind)).to.include('compaction');
    await r.close();
  });

  it('R14.2 given finished Runs on PostgreSQL, when the CLI runs compact --before DATE --postgres URL, then it prints the report and verify stays green', async function () {
    buildOnce();
    const { db, runIds } = await finishedStore(2);
    const report = json<{ compacted: { runId: string }[]; tableBytes: { before: number; after: number } }>(await runCli(['compact', '--before', new Date(Date.now() + 3_600_000).toISOString(), '--postgres', db.url]));
    expect(report.compacted.map((c) => c.runId).sort()).to.deep.equal([...runIds].sort());
    const verify = await runCli(['verify', '--postgres', db.url]);
    expect(verify.code, verify.stdout + verify.stderr).to.equal(0);
  });

  describe('R14.2 with the operator\'s own login (not a superuser)', () => {
    const login = `sb_retention_spec_${process.pid}`;
    const urlAs = (url: string) => url.replace('postgres://postgres@', `postgres://${login}@`);
    before(async () => {
      const admin = testPool({ connectionString: (await template.clone().then((db) => (dbs.push(db), db))).url, max: 1 });
      await admin.query(`CREATE ROLE ${login} LOGIN IN ROLE ql3_runtime, ql3_retention`);
      await admin.end();
    });
    after(async () => {
      for (const db of dbs.splice(0)) await db.drop();
      const admin = testPool({ connectionString: (await template.clone().then((db) => (dbs.push(db), db))).url, max: 1 });
      await admin.query(`DROP ROLE IF EXISTS ${login}`);
      await admin.end();
    });

    it('R14.2 given a login in ql3_runtime and ql3_retention, when it compacts, then the finished Runs go and verify is green; without ql3_retention the same login is refused', async () => {
      const { db, runIds } = await finishedStore(2);
      const r = await openPostgresRetention({ connectionString: urlAs(db.url), migrate: false });
      const report = await r.compact({ before: Date.now() + 3_600_000 });
      expect(report.compacted.map((c) => c.runId).sort()).to.deep.equal([...runIds].sort());
      const v = await r.authority.recovery.verify();
      expect(v.problems, JSON.stringify(v.problems)).to.deep.equal([]);
      await r.close();
      const more = await finishedStore(1);
      const runtimeOnly = await openPostgresRetention({ connectionString: more.db.url, migrate: false, poolConfig: { options: '-c role=ql3_runtime' } } as never);
      const e = await runtimeOnly.compact({ before: Date.now() + 3_600_000 }).then(() => undefined, (x: unknown) => x);
      expect(String(e)).to.match(/permission denied for function compact_run/);
      expect(await runtimeOnly.authority.barriers.getByStartId(more.startIds[0]!)).to.not.equal(null);
      await runtimeOnly.close();
    });
  });
});
