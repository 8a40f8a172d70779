import { expect } from 'chai';
import { Pool, type PoolClient } from 'pg';
import { CorruptRecordError, SemanticConflictError, canonicalJson, digestCanonical, RECORD_TAGS, type ToolExecutionStartCommand } from '../../domain';
import { buildScenario, type Scenario } from '../../domain/scenario';
import type { PostgresStartBarrier } from '../../infrastructure/postgres';
import { createDatabase, openOn, rejects, testPool, type TestDatabase } from '../../testkit/postgresHarness';

// R5.3 on PostgreSQL: the owner (or a superuser with triggers off) damages one cell at a time;
// every read fails closed with CorruptRecordError, never a best guess, and a replayed prepare
// never answers `existing` from damaged rows. Each cell is put back before the next one.

// The sweeps of every cell and the duplicated identities run on every backend from one source:
// specs/conformance/damageConformance.ts (specs/postgres/damage.int.spec.ts). What stays here is
// PostgreSQL's own: the owner's triggers, a consistent forgery, a missing barrier row, damaged heads.

describe('PostgreSQL corruption: reads fail closed (R5.3)', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let a: PostgresStartBarrier;
  let admin: Pool;
  let s: Scenario;
  let command: ToolExecutionStartCommand;

  before(async () => {
    db = await createDatabase();
    a = await openOn(db);
    admin = testPool({ connectionString: db.url, max: 2 });
    s = buildScenario();
    for (const c of s.lifecycle) await a.runs.handle(c);
    command = s.startCommand();
    await a.barriers.prepare(command);
  });
  after(async () => {
    await a?.close();
    await admin?.end();
    await db?.drop();
  });

  /** As a superuser with every trigger (append-only and foreign keys) off, for one transaction. */
  const asReplica = async (body: (c: PoolClient) => Promise<void>): Promise<void> => {
    const c = await admin.connect();
    try {
      await c.query('BEGIN');
      await c.query('SET LOCAL session_replication_role = replica');
      await body(c);
      await c.query('COMMIT');
    } catch (e) {
      await c.query('ROLLBACK');
      throw e;
    } finally {
      c.release();
    }
  };

  /** Every read must fail closed; a replayed prepare must fail typed, never answer from damage. */
  const expectFailsClosed = async (what: string): Promise<void> => {
    const byId = await rejects(a.barriers.getByStartId(command.startId));
    expect(byId, `${what}: getByStartId ${byId.message}`).to.be.instanceOf(CorruptRecordError);
    const byAttempt = await rejects(a.barriers.getByStepRunAttempt(s.runId, s.stepRunId, 3));
    expect(byAttempt, `${what}: getByStepRunAttempt ${byAttempt.message}`).to.be.instanceOf(CorruptRecordError);
    const replay = await rejects(a.barriers.prepare(command));
    // a damaged digest in the index reads as a different command bound to that identity (R4.3)
    expect(replay instanceof CorruptRecordError || replay instanceof SemanticConflictError, `${what}: prepare ${replay.message}`).to.equal(true);
  };

  const expectHealthy = async (): Promise<void> => {
    expect((await a.barriers.getByStartId(command.startId))?.record.startId).to.equal(command.startId);
    expect((await a.barriers.prepare(command)).outcome).to.equal('existing');
  };

  it('R6.4 even the owner cannot change a barrier without first disabling its triggers; then any change is caught', async () => {
    const owner = await admin.connect();
    try {
      await owner.query('SET ROLE ql3_owner');
      const refused = await rejects(owner.query(`UPDATE ql3.tool_execution_start_barriers SET adapter_id = 'adapter.other' WHERE start_id = $1`, [command.startId]));
      expect((refused as { code?: string }).code).to.equal('23000');
      await owner.query('ALTER TABLE ql3.tool_execution_start_barriers DISABLE TRIGGER USER');
      await owner.query(`UPDATE ql3.tool_execution_start_barriers SET adapter_id = 'adapter.other' WHERE start_id = $1`, [command.startId]);
      try {
        await expectFailsClosed('owner changed adapter_id');
      } finally {
        await owner.query(`UPDATE ql3.tool_execution_start_barriers SET adapter_id = $2 WHERE start_id = $1`, [command.startId, command.contracts.adapter.id]);
        await owner.query('ALTER TABLE ql3.tool_execution_start_barriers ENABLE TRIGGER USER');
        await owner.query('RESET ROLE');
      }
    } finally {
      owner.release();
    }
    await expectHealthy();
  });

  it('R5.3 a consistent forgery (barrier JSON rewritten in its event, re-canonicalised, re-digested, mirrors updated) still fails against its facts', async () => {
    const eventId = `barrier:${command.startId}`;
    const event = (await admin.query<{ data_json: string }>(`SELECT data_json FROM ql3.events WHERE event_id = $1`, [eventId])).rows[0]!;
    const row = (await admin.query<{ barrier_digest: string }>(`SELECT barrier_digest FROM ql3.tool_execution_start_barriers WHERE start_id = $1`, [command.startId])).rows[0]!;
    const forged = (JSON.parse(event.data_json) as { barrier: { contracts: { adapter: { id: string } } } }).barrier;
    forged.contracts.adapter.id = 'adapter.http.v9';
    const json = canonicalJson(forged);
    const digest = digestCanonical(RECORD_TAGS.barrier, json);
    const put = (data: string, barrierDigest: string, adapterId: string) =>
      asReplica(async (c) => {
        await c.query(`UPDATE ql3.events SET data_json = $1 WHERE event_id = $2`, [data, eventId]);
        await c.query(`UPDATE ql3.tool_execution_start_barriers SET barrier_digest = $1, adapter_id = $2 WHERE start_id = $3`, [barrierDigest, adapterId, command.startId]);
      });
    await put(`{"barrier":${json},"barrierDigest":${JSON.stringify(digest)}}`, digest, 'adapter.http.v9');
    try {
      await expectFailsClosed('forged barrier');
    } finally {
      await put(event.data_json, row.barrier_digest, command.contracts.adapter.id);
    }
    await expectHealthy();
  });

  it('R5.3 a damaged StepRun or Run head fails the next start closed, writing nothing; a damaged event fails readStream', async () => {
    const next = buildScenario();
    for (const c of next.lifecycle) await a.runs.handle(c);
    const start = next.startCommand();
    const count = async () => Number((await admin.query<{ n: string }>('SELECT count(*) AS n FROM ql3.events')).rows[0]!.n);
    const cases: [string, string, unknown[], string, unknown[]][] = [
      ['step_runs.status', `UPDATE ql3.step_runs SET status = 'running' WHERE run_id = $1`, [next.runId], `UPDATE ql3.step_runs SET status = 'ready' WHERE run_id = $1`, [next.runId]],
      ['step_runs.state_json', `UPDATE ql3.step_runs SET state_json = replace(state_json, '"ready"', '"running"') WHERE run_id = $1`, [next.runId], `UPDATE ql3.step_runs SET state_json = replace(state_json, '"running"', '"ready"') WHERE run_id = $1`, [next.runId]],
      ['runs.version', `UPDATE ql3.runs SET version = version + 1 WHERE run_id = $1`, [next.runId], `UPDATE ql3.runs SET version = version - 1 WHERE run_id = $1`, [next.runId]],
      ['runs.project_id', `UPDATE ql3.runs SET project_id = 'other-project' WHERE run_id = $1`, [next.runId], `UPDATE ql3.runs SET project_id = $2 WHERE run_id = $1`, [next.runId, next.projectId]],
    ];
    for (const [what, breakSql, breakParams, fixSql, fixParams] of cases) {
      await asReplica((c) => c.query(breakSql, breakParams).then(() => undefined));
      try {
        const before = await count();
        const e = await rejects(a.barriers.prepare(start));
        // a moved project is caught by the decider as a precondition; every other damage as corruption
        if (what === 'runs.project_id') expect(e.message, what).to.match(/project_mismatch/);
        else expect(e, `${what}: ${e.message}`).to.be.instanceOf(CorruptRecordError);
        expect(await count(), what).to.equal(before);
      } finally {
        await asReplica((c) => c.query(fixSql, fixParams).then(() => undefined));
      }
    }
    await asReplica((c) => c.query(`UPDATE ql3.events SET data_json = data_json || ' ' WHERE stream_id = $1 AND stream_position = 1`, [`run-${next.runId}`]).then(() => undefined));
    expect(await rejects(a.runs.readStream(next.runId))).to.be.instanceOf(CorruptRecordError);
    await asReplica((c) => c.query(`UPDATE ql3.events SET data_json = rtrim(data_json) WHERE stream_id = $1 AND stream_position = 1`, [`run-${next.runId}`]).then(() => undefined));
    expect((await a.barriers.prepare(start)).outcome).to.equal('created');
  });
});
