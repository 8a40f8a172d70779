import { expect } from 'chai';
import { buildOnce, runCli } from '../cli/cliSuite';
import { rejects, startedScenario } from './recoveryConformance';
import { completion, eachFreshPostgres, expectCorrupt } from './support';

// What only the real server can show for the outcome read model: the projection trigger writes
// the outcome row in the statement that appends its event (a failing projection rolls the event
// back), no product role can write the read model, and damage (made as the
// superuser with the append-only triggers and foreign keys switched off) fails closed.

describe('recovery read models on PostgreSQL: atomicity, grants, damage', function () {
  this.timeout(120_000);
  const on = eachFreshPostgres();

  it('issue 5: a failing projection rolls back its outcome event (same statement, same transaction)', async () => {
    const { s, startId } = await startedScenario(on.a);
    await on.db.admin((c) => c.query("ALTER TABLE ql3.start_outcomes ADD CONSTRAINT injected_fault CHECK (reason <> 'adapter_error')"));
    const before = await on.a.runs.readStream(s.runId);
    await rejects(on.a.recovery.resolve(startId, 'completed', { decidedBy: 'ops', reason: 'adapter_error' }));
    expect(await on.a.runs.readStream(s.runId)).to.deep.equal(before);
    expect((await on.a.runs.getStepRun(s.runId, s.stepRunId))?.status).to.equal('running');
    expect((await on.a.recovery.inDoubt()).map((e) => e.startId)).to.deep.equal([startId]);
    expect((await on.a.recovery.resolve(startId, 'completed', { decidedBy: 'ops', reason: 'tool_succeeded' })).status).to.equal('recorded');
  });

  it('issue 5: no product role can write the read model; the runtime and operators can read it', async () => {
    const rights = await on.db.admin(async (c) => {
      const { rows } = await c.query<{ role: string; sel: boolean; ins: boolean; upd: boolean; del: boolean }>(
        `SELECT r AS role, has_table_privilege(r, 'ql3.start_outcomes', 'SELECT') AS sel, has_table_privilege(r, 'ql3.start_outcomes', 'INSERT') AS ins,
                has_table_privilege(r, 'ql3.start_outcomes', 'UPDATE') AS upd, has_table_privilege(r, 'ql3.start_outcomes', 'DELETE') AS del
           FROM unnest(ARRAY['ql3_runtime', 'ql3_admin', 'ql3_reader', 'ql3_worker_ingress', 'ql3_package_executor']) AS r ORDER BY r`,
      );
      return rows;
    });
    for (const r of rights) expect({ ins: r.ins, upd: r.upd, del: r.del }, r.role).to.deep.equal({ ins: false, upd: false, del: false });
    expect(rights.filter((r) => r.sel).map((r) => r.role)).to.have.members(['ql3_admin', 'ql3_reader', 'ql3_runtime']);
  });

  it('issue 5: verify checks every foreign key of ql3 from the catalog, plus orphaned evidence and stream heads', async () => {
    const orphaned = await startedScenario(on.a);
    const skewed = await startedScenario(on.a);
    await on.db.admin(async (c) => {
      await c.query('SET session_replication_role = replica'); // foreign keys and triggers off: simulated damage
      await c.query('DELETE FROM ql3.step_runs WHERE run_id = $1', [orphaned.s.runId]);
      await c.query("INSERT INTO ql3.trace_anchors SELECT 'trace-ghost', span_id, 'start-ghost', run_id, step_run_id, trace_digest, committed_at_ms FROM ql3.trace_anchors WHERE start_id = $1", [skewed.startId]);
      await c.query('UPDATE ql3.streams SET version = version + 1 WHERE stream_id = $1', [`run-${skewed.s.runId}`]);
    });
    const report = await on.a.recovery.verify();
    expect(report.ok).to.equal(false);
    const of = (kind: string) => report.problems.filter((p) => p.kind === kind).map((p) => p.record);
    expect(of('foreign_key').map((r) => r.split(' ')[0])).to.include.members(['tool_execution_start_barriers', 'step_run_mutations']);
    expect(of('evidence_without_move')).to.deep.equal(['trace_anchors trace-ghost']);
    expect(of('stream_head')).to.deep.equal([`run-${skewed.s.runId}`]);
    expect(of('in_doubt_mismatch')).to.deep.equal([orphaned.startId]);
  });

  /** As the owner, past the append-only triggers and the foreign keys. */
  const damage = (sql: string) => on.db.admin((c) => c.query(`BEGIN; SET LOCAL session_replication_role = replica; ${sql}; COMMIT`));

  it('R9.3 verify reports a Run head whose version no row can hold, and a second damage after it: it never throws for damage (CLI exit 5)', async () => {
    const one = await startedScenario(on.a);
    const two = await startedScenario(on.a);
    await damage(`UPDATE ql3.runs SET version = 9007199254740993 WHERE run_id = '${one.s.runId}'; UPDATE ql3.trace_anchors SET trace_digest = 'sha256:${'0'.repeat(64)}' WHERE start_id = '${two.startId}'`);
    const report = await on.a.recovery.verify();
    expect(report.ok).to.equal(false);
    expect(report.problems.some((p) => p.record === two.startId), JSON.stringify(report.problems)).to.equal(true);
    expect(report.problems.some((p) => p.problem.includes(one.s.runId) || p.record.includes(one.s.runId)), JSON.stringify(report.problems)).to.equal(true);
    buildOnce();
    expect((await runCli(['verify', '--postgres', on.db.url])).code).to.equal(5);
  });

  it('R9.2 R9.3 two events of a stream swapped in the global order (deleted and put back with each other\'s global position): readStream fails closed', async () => {
    const { s } = await startedScenario(on.a);
    const stream = `run-${s.runId}`;
    const columns = 'stream_id, stream_position, event_id, event_type, data_json, committed_at_ms, chain_digest';
    await damage(`CREATE TEMP TABLE moved ON COMMIT DROP AS SELECT * FROM ql3.events WHERE stream_id = '${stream}' AND stream_position IN (1, 2);
      DELETE FROM ql3.events WHERE stream_id = '${stream}' AND stream_position IN (1, 2);
      INSERT INTO ql3.events (global_position, ${columns}) OVERRIDING SYSTEM VALUE
        SELECT (SELECT min(global_position) + max(global_position) FROM moved) - global_position, ${columns} FROM moved`);
    await expectCorrupt('readStream', on.a.runs.readStream(s.runId));
  });

  it('R9.3 an outcome appended for a start whose barrier row is gone, or over an outcome row that stands without its event, is CORRUPT_RECORD and writes nothing', async () => {
    const gone = await startedScenario(on.a);
    await damage(`DELETE FROM ql3.tool_execution_start_barriers WHERE start_id = '${gone.startId}'`);
    const stray = await startedScenario(on.a);
    await damage(`INSERT INTO ql3.start_outcomes SELECT start_id, run_id, step_run_id, 'completed', 'nobody', 'tool_succeeded', NULL, 99, 'no-such-event', 1, 1, 1
      FROM ql3.tool_execution_start_barriers WHERE start_id = '${stray.startId}'`);
    for (const { s } of [gone, stray]) {
      const before = await on.db.admin(async (c) => (await c.query('SELECT count(*)::int AS n FROM ql3.events')).rows[0].n as number);
      await expectCorrupt(s.runId, on.a.runs.handle(completion(s)));
      expect(await on.db.admin(async (c) => (await c.query('SELECT count(*)::int AS n FROM ql3.events')).rows[0].n as number)).to.equal(before);
    }
  });
});
