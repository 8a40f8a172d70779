import { expect } from 'chai';
import { CorruptRecordError } from '../../domain';
import { openPostgresStartBarrier, type RecoverablePostgresStartBarrier } from '../../infrastructure/postgres/postgresAuthority';
import { MigratedTemplate, type TestDatabase } from '../../testkit/postgresHarness';
import { rejects, startedScenario } from '../recovery/recoveryConformance';

// The replay index on PostgreSQL: the barrier writes its seven rows, the runtime cannot add one,
// and a row naming a start under a value its barrier does not hold is reported by verify and
// fails the lookup of that value closed.

describe('the replay index on PostgreSQL', function () {
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

  it('R4.1, R9.1 the barrier writes its own seven index rows ; the runtime cannot add one', async () => {
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
