import { expect } from 'chai';
import { CorruptRecordError } from '../../domain';
import { openPostgresStartBarrier, type RecoverablePostgresStartBarrier } from '../../infrastructure/postgres/postgresAuthority';
import { MigratedTemplate, type TestDatabase } from '../../testkit/postgresHarness';
import { rejects, startedScenario } from '../recovery/recoveryConformance';

// R4.1 on PostgreSQL: each replay identity is the unique key of the fact that carries it, and
// the barrier's insert checks that every fact it names carries its start id, so a value binds
// one start at most, whoever writes (the owner included). A fact written past the triggers
// under a value its barrier does not hold is reported by verify and fails its lookup closed.

describe('the replay identities as the facts\' own keys on PostgreSQL', function () {
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
    await a.close().catch(() => undefined);
    await db.drop();
  });

  it('R4.1, R9.1 a barrier naming a fact of another start is refused, even written by the owner; nothing is written', async () => {
    const first = await startedScenario(a);
    const second = await startedScenario(a);
    const count = () => db.admin(async (c) => (await c.query<{ n: string }>('SELECT count(*) AS n FROM ql3.tool_execution_start_barriers')).rows[0]!.n);
    const before = await count();
    for (const column of ['mutation_id', 'trace_id', 'audit_event_id', 'audit_receipt_id', 'run_event_id']) {
      // the second start's barrier row again, under a new start id, naming one fact of the first start
      const error = await db.admin((c) =>
        c
          .query(
            `INSERT INTO ql3.tool_execution_start_barriers
               SELECT (jsonb_populate_record(b, jsonb_build_object('start_id', 'forged-' || $3::text, $3::text, f.${column}))).*
                 FROM ql3.tool_execution_start_barriers b, ql3.tool_execution_start_barriers f WHERE b.start_id = $1 AND f.start_id = $2`,
            [second.startId, first.startId, column],
          )
          .then(
            () => undefined,
            (e: Error & { code?: string }) => e,
          ),
      );
      expect(error?.message, column).to.match(/names a [a-zA-Z ]+ of another start/);
    }
    expect(await count()).to.equal(before);
    expect((await a.recovery.verify()).ok).to.equal(true);
  });

  it('R4.1 a fact naming a start under a value its barrier does not hold (written past the triggers): verify names it, a lookup of that value fails closed, the start still reads', async () => {
    const { startId } = await startedScenario(a);
    await db.admin((c) =>
      c.query(`SET session_replication_role = replica;
        INSERT INTO ql3.trace_anchors SELECT 'trace-stray', span_id, start_id, run_id, step_run_id, trace_digest, committed_at_ms FROM ql3.trace_anchors WHERE start_id = '${startId}';
        SET session_replication_role = DEFAULT;`),
    );
    const report = await a.recovery.verify();
    expect(report.ok).to.equal(false);
    expect(JSON.stringify(report.problems)).to.contain('trace-stray');
    const lookup = await rejects(a.recovery.lookup('traceId', 'trace-stray'));
    expect(lookup, lookup.message).to.be.instanceOf(CorruptRecordError);
    expect((await a.barriers.getByStartId(startId))?.record.startId).to.equal(startId);
  });
});
