import { expect } from 'chai';
import Database from 'better-sqlite3';
import { buildOnce, runCli } from '../cli/cliSuite';
import { CorruptRecordError } from '../../domain';
import { openSqliteStartBarrier, type SqliteStartBarrier } from '../../infrastructure/sqlite';
import { stepRunRowOf } from '../../projections/rows';
import { openFreshSqlite } from '../sqlite/support';
import { freshDbPath } from '../support/tmp';
import { rejects, startedScenario } from './recoveryConformance';
import { completion, expectCorrupt } from './support';
import { withTriggersDropped } from '../../testkit/damage';

// What only a real SQLite file can show: the outcome row and its event share one
// transaction (an upgraded store's outcomes: specs/sqlite/upgradeFrom0056), and damage (simulated with
// the raw connection after dropping the append-only triggers) fails closed and is listed by
// `verify`.

/** The triggers that guard the stream, Run and StepRun heads (R9.1). */
const HEAD_GUARDS = ['streams_legal_move', 'streams_no_delete', 'runs_legal_move', 'runs_no_delete', 'step_runs_legal_move', 'step_runs_no_delete'] as const;

describe('recovery read models on SQLite: atomicity, upgrade, damage', function () {
  this.timeout(60_000);
  let a: SqliteStartBarrier;
  beforeEach(async () => {
    a = await openFreshSqlite();
  });
  afterEach(() => a.close());

  it('issue 5: the outcome row commits with its event or not at all (inline projection)', async () => {
    const { s, startId } = await startedScenario(a);
    // the fault: an index whose expression fails for this start's row (an extra trigger would be
    // refused first, as a schema the migrations did not make)
    a.db.exec(`CREATE INDEX inject_fault ON start_outcomes ((CASE WHEN start_id = '${startId}' THEN json('injected projection fault') END))`);
    const before = await a.runs.readStream(s.runId);
    const error = await rejects(a.recovery.resolve(startId, 'completed', { decidedBy: 'ops', reason: 'tool_succeeded' }));
    expect(error.message).to.contain('malformed JSON');
    expect(await a.runs.readStream(s.runId)).to.deep.equal(before);
    expect((await a.runs.getStepRun(s.runId, s.stepRunId))?.status).to.equal('running');
    expect((await a.recovery.inDoubt()).map((e) => e.startId)).to.deep.equal([startId]);
    a.db.exec('DROP INDEX inject_fault');
    expect((await a.recovery.resolve(startId, 'completed', { decidedBy: 'ops', reason: 'tool_succeeded' })).status).to.equal('recorded');
  });

  it('issue 5: an outcome event appended through the emmett EventStore is projected in the same transaction too', async () => {
    const { s, startId } = await startedScenario(a);
    const version = (await a.runs.readStream(s.runId)).length;
    await a.eventStore.appendToStream(
      `run-${s.runId}`,
      [{ type: 'StepRunLost', data: { runId: s.runId, stepRunId: s.stepRunId, startId, stepRunVersion: 4, resolution: { decidedBy: 'orchestrator', reason: 'lease_expired' }, occurredAtMs: 12 } }],
      { expectedStreamVersion: BigInt(version) },
    );
    expect(await a.recovery.outcome(startId)).to.include({ outcome: 'lost', decidedBy: 'orchestrator', reason: 'lease_expired', requestedAtMs: 12 });
    expect(await a.recovery.inDoubt()).to.deep.equal([]);
  });

  it('issue 5 / R4.1: a fact naming another start (its identity moved to another barrier) fails closed on lookup and on both barriers; verify lists it', async () => {
    const one = await startedScenario(a);
    const two = await startedScenario(a);
    const traceId = one.barrier.record.trace.traceId;
    // The identity is the key of the fact that holds it: the damaging process moves the fact.
    withTriggersDropped(a.db as unknown as Database.Database, (t) => t.tbl_name === 'trace_anchors', () => a.db.prepare('UPDATE trace_anchors SET start_id = ? WHERE trace_id = ?').run(two.startId, traceId));
    const lookup = await rejects(a.recovery.lookup('traceId', traceId));
    expect(lookup).to.be.instanceOf(CorruptRecordError);
    expect(lookup.message).to.contain(`names start ${two.startId}, whose barrier binds another value`);
    expect(await rejects(a.barriers.getByStartId(one.startId))).to.be.instanceOf(CorruptRecordError);
    expect(await rejects(a.barriers.prepare(one.s.startCommand()))).to.be.instanceOf(CorruptRecordError);
    const report = await a.recovery.verify();
    expect(report.problems.map((p) => p.kind)).to.include.members(['stray_identity', 'barrier']);
    expect(report.problems.find((p) => p.kind === 'stray_identity')!.record).to.equal(`traceId ${traceId}`);
  });

  it('issue 5: verify lists every bad record: foreign keys, evidence without its move, running without a barrier, stream heads, in-doubt mismatch', async () => {
    const healthy = await startedScenario(a);
    const orphaned = await startedScenario(a);
    const ghostly = await startedScenario(a);
    const skewed = await startedScenario(a);
    const lying = await startedScenario(a);
    const lyingHead = (await a.runs.getStepRun(lying.s.runId, lying.s.stepRunId))!;
    a.db.pragma('foreign_keys = OFF');
    // a process that drops the head guards (R9.1) first; `verify` must still name every damage
    for (const guard of HEAD_GUARDS) a.db.exec(`DROP TRIGGER ${guard}`);
    // A StepRun row deleted under its barrier, mutation and evidence.
    a.db.prepare('DELETE FROM step_runs WHERE run_id = ? AND step_run_id = ?').run(orphaned.s.runId, orphaned.s.stepRunId);
    // Evidence of a start that never moved a StepRun.
    a.db.exec('DROP TRIGGER security_audit_events_no_delete; DROP TRIGGER security_audit_events_beside_their_event');
    a.db
      .prepare('INSERT INTO security_audit_events SELECT ?, ?, run_id, step_run_id, audit_event_digest, committed_at_ms FROM security_audit_events WHERE start_id = ?')
      .run('audit-ghost', 'start-ghost', ghostly.startId);
    // A StepRun that says running at an attempt that has no barrier (self-consistent row).
    const { digest: _d, ...state } = lyingHead;
    const row = stepRunRowOf({ ...state, version: 9, lastStartId: 'start-ghost' });
    a.db.prepare('UPDATE step_runs SET version = @version, digest = @digest, state_json = @state_json WHERE run_id = @run_id AND step_run_id = @step_run_id').run(row);
    // A stream head that claims one event more than its log holds.
    a.db.prepare('UPDATE streams SET version = version + 1 WHERE stream_id = ?').run(`run-${skewed.s.runId}`);
    a.db.pragma('foreign_keys = ON');

    const report = await a.recovery.verify();
    expect(report.ok).to.equal(false);
    const kinds = (kind: string) => report.problems.filter((p) => p.kind === kind);
    expect(kinds('foreign_key').map((p) => p.record.split(' ')[0])).to.include.members(['tool_execution_start_barriers', 'step_run_mutations']);
    expect(kinds('evidence_without_move').map((p) => p.record)).to.deep.equal(['security_audit_events audit-ghost']);
    expect(kinds('running_without_barrier').map((p) => p.record)).to.deep.equal([`${lying.s.runId}/${lying.s.stepRunId}`]);
    expect(kinds('stream_head').map((p) => p.record)).to.deep.equal([`run-${skewed.s.runId}`]);
    expect(kinds('run').map((p) => p.record)).to.deep.equal([skewed.s.runId]);
    expect(kinds('in_doubt_mismatch').map((p) => p.record)).to.have.members([orphaned.startId, lying.startId]);
    expect(report.problems.some((p) => p.record.includes(healthy.startId) || p.record.includes(healthy.s.runId))).to.equal(false);
    // Reads of the damaged attempts fail closed too.
    expect(await rejects(a.recovery.inDoubt())).to.be.instanceOf(CorruptRecordError);
  });
});

// R9.3 past the row: a table or a column gone, a row a write references gone. Every read and
// write answers with the typed error, never a raw driver error, and verify reports the damage
// and goes on, never throws for it.
describe('R9.3 damage past the row is typed on SQLite: a table gone, a referenced row gone', function () {
  this.timeout(120_000);

  /**
   * A store with one start in doubt, damaged through a connection of the owner's own (with
   * `open`, under an authority still open). The damage is the row or the table: the triggers
   * of the tables still there are made again, or the open would refuse the file for them.
   */
  const damaged = async (sql: string, open = false): Promise<{ path: string; startId: string; s: { runId: string; stepRunId: string }; a: SqliteStartBarrier }> => {
    const path = freshDbPath();
    const a = await openSqliteStartBarrier({ path });
    const { s, startId } = await startedScenario(a);
    if (!open) await a.close();
    const db = new Database(path);
    db.pragma('foreign_keys = OFF');
    withTriggersDropped(db, () => false, () => db.exec(sql.replaceAll(':start', `'${startId}'`)));
    db.close();
    return { path, startId, s, a };
  };

  it('R9.3 verify reports a table gone (driver claims, resolution notes, capabilities) and checks the rest: it never throws for damage (CLI exit 5)', async () => {
    for (const table of ['adapter_driver_claims', 'resolution_notes', 'capabilities']) {
      // under an authority already open: an open refuses the file (the schema objects)
      const { path, a } = await damaged(`DROP TABLE ${table}`, true);
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

  it('R9.3 a store whose table or column is gone opens as CORRUPT_RECORD, never a raw driver error; the driver claims of an authority opened before it likewise (at their first use)', async () => {
    for (const sql of ['DROP TABLE start_outcomes', 'DROP TABLE streams']) {
      const { path } = await damaged(sql);
      await expectCorrupt(sql, openSqliteStartBarrier({ path }));
    }
    await expectCorrupt('DROP TABLE adapter_driver_claims', openSqliteStartBarrier({ path: (await damaged('DROP TABLE adapter_driver_claims')).path }));
    const { a } = await damaged('DROP TABLE adapter_driver_claims', true);
    // the claims share the authority's connection (ADR §4): each use fails closed on the schema changed under it
    const claims = a.driverClaims();
    for (const use of [() => claims.claim('start-any', 'driver-1', 60_000), () => claims.history('start-any')]) {
      expect(await use().then(() => 'ANSWERED', (e: unknown) => e)).to.be.instanceOf(CorruptRecordError);
    }
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
