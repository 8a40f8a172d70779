import { expect } from 'chai';
import { CorruptRecordError } from '../../domain';
import { openPostgresStartBarrier, type RecoverablePostgresStartBarrier } from '../../infrastructure/postgres/postgresAuthority';
import { MigratedTemplate, type TestDatabase } from '../../testkit/postgresHarness';
import { UNDO_COMPACT_INDEX } from './historyUndo';
import { rejects, startedScenario } from '../recovery/recoveryConformance';

// The compact replay index (pg-0051): a store taken back to before it (each identity row
// repeating its command digest, an index on start_id) moves forward: the index then equals the
// old one joined with the barriers, row for row; a store where a repeated digest differs from
// its barrier's is refused, and nothing is applied; a row naming a start under a value its
// barrier does not hold is reported by verify and fails the lookup of that value closed.

const INDEX_ROWS = `SELECT i.identity, i.value, i.start_id, b.command_digest FROM ql3.start_replay_identities i
  JOIN ql3.tool_execution_start_barriers b ON b.start_id = i.start_id ORDER BY i.identity, i.value`;

describe('the compact replay index on PostgreSQL (pg-0051)', function () {
  this.timeout(120_000);
  const template = new MigratedTemplate();
  let db: TestDatabase;
  let a: RecoverablePostgresStartBarrier;
  after(() => template.dropAll());
  beforeEach(async () => {
    db = await template.clone();
    a = await openPostgresStartBarrier({ connectionString: db.url });
  });
  afterEach(async () => {
    await a.close().catch(() => undefined); // closed already where a spec reopens and is refused
    await db.drop();
  });

  const columnsAndIndexes = () =>
    db.admin(async (c) => ({
      columns: (await c.query<{ n: string }>("SELECT column_name AS n FROM information_schema.columns WHERE table_schema = 'ql3' AND table_name = 'start_replay_identities' ORDER BY ordinal_position")).rows.map((r) => r.n),
      indexes: (await c.query<{ n: string }>("SELECT indexname AS n FROM pg_indexes WHERE schemaname = 'ql3' AND tablename = 'start_replay_identities' ORDER BY indexname")).rows.map((r) => r.n),
    }));

  it('R4.1 a store from before pg-0051 moves forward: the same index rows (command digest from the barrier), one unique index, and it verifies', async () => {
    await startedScenario(a);
    await startedScenario(a);
    await a.close();
    await db.admin((c) => c.query(UNDO_COMPACT_INDEX));
    const before = await db.admin(async (c) => (await c.query('SELECT identity, value, start_id, command_digest FROM ql3.start_replay_identities ORDER BY identity, value')).rows);
    expect(before).to.have.length(14);
    expect((await columnsAndIndexes()).columns).to.include('command_digest');
    a = await openPostgresStartBarrier({ connectionString: db.url });
    expect(await columnsAndIndexes()).to.deep.equal({ columns: ['identity', 'value', 'start_id'], indexes: ['start_replay_identities_key'] });
    expect(await db.admin(async (c) => (await c.query(INDEX_ROWS)).rows)).to.deep.equal(before);
    const report = await a.recovery.verify();
    expect(report.ok, JSON.stringify(report.problems)).to.equal(true);
  });

  it('a store whose index row repeats a command digest its barrier does not hold is refused, and nothing is applied', async () => {
    await startedScenario(a);
    await a.close();
    await db.admin((c) =>
      c.query(`${UNDO_COMPACT_INDEX}
        SET session_replication_role = replica;
        UPDATE ql3.start_replay_identities SET command_digest = 'sha256:0' WHERE identity = 'traceId';
        SET session_replication_role = DEFAULT;`),
    );
    const error = await rejects(openPostgresStartBarrier({ connectionString: db.url }));
    expect(String(error)).to.contain('a_replay_identity_differs_from_its_barrier');
    expect((await columnsAndIndexes()).columns).to.include('command_digest');
    expect(await db.admin(async (c) => (await c.query("SELECT name FROM ql3.schema_migrations WHERE name >= 'pg-0051'")).rows)).to.deep.equal([]);
  });

  it('R4.1, R9.1 the barrier writes its own seven index rows (pg-0059); the runtime cannot add one', async () => {
    const { startId } = await startedScenario(a);
    const rows = await db.admin(async (c) => (await c.query('SELECT identity, value FROM ql3.start_replay_identities WHERE start_id = $1 ORDER BY identity', [startId])).rows);
    const record = (await a.barriers.getByStartId(startId))!.record;
    expect(rows).to.deep.equal([
      { identity: 'attempt', value: JSON.stringify([record.runId, record.stepRunId, record.attempt.startedStepRunVersion]) },
      { identity: 'auditEventId', value: record.audit.auditEventId },
      { identity: 'auditReceiptId', value: record.audit.auditReceiptId },
      { identity: 'mutationId', value: record.mutation.mutationId },
      { identity: 'runEventId', value: record.runEvent.runEventId },
      { identity: 'startId', value: startId },
      { identity: 'traceId', value: record.trace.traceId },
    ]);
    const asRuntime = await db.admin((c) =>
      c.query(`BEGIN; SET LOCAL ROLE ql3_runtime; INSERT INTO ql3.start_replay_identities (identity, value, start_id) VALUES ('traceId', 'trace-stray', '${startId}')`).then(
        () => undefined,
        (e: Error) => e,
      ),
    );
    expect(asRuntime?.message).to.match(/permission denied/);
    expect((await a.recovery.verify()).ok).to.equal(true);
  });

  it('R4.1 a row naming a start under a value its barrier does not hold (written by the owner): verify names it, a lookup of that value fails closed, the start still reads', async () => {
    const { startId } = await startedScenario(a);
    await db.admin((c) => c.query("INSERT INTO ql3.start_replay_identities (identity, value, start_id) VALUES ('traceId', 'trace-stray', $1)", [startId]));
    const report = await a.recovery.verify();
    expect(report.problems.map((p) => [p.kind, p.record])).to.deep.include(['stray_identity', 'traceId trace-stray']);
    const lookup = await rejects(a.recovery.lookup('traceId', 'trace-stray'));
    expect(lookup, lookup.message).to.be.instanceOf(CorruptRecordError);
    expect((await a.barriers.getByStartId(startId))?.record.startId).to.equal(startId);
  });
});
