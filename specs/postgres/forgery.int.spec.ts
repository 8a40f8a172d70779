import { expect } from 'chai';
import { CorruptRecordError } from '../../domain';
import { buildScenario } from '../../domain/scenario';
import { openPostgresStartBarrier } from '../../infrastructure/postgres';
import { mapTimeout } from '../../infrastructure/postgres/errors';
import { FORGERIES } from '../../testkit/forgery';
import { postgresForgeryTarget } from '../../testkit/forgeryTargets';
import { createDatabase, type TestDatabase } from '../../testkit/postgresHarness';
import { forgerySuite, keyedForgerySuite } from '../conformance/forgeryConformance';
import { openKeyedForgeryTarget } from '../../testkit/keyedForgery';

// R9.1: as ql3_runtime (the credentials a runtime replica holds, migrate: false), the database
// itself refuses every forgery: no grant to rewrite a head, and the event trigger for the rest.
describe('R9.1 forgeries with the runtime role on PostgreSQL: every one refused by the database', function () {
  this.timeout(120_000);
  const dbs: TestDatabase[] = [];
  after(async () => {
    for (const db of dbs) await db.drop();
  });
  forgerySuite(
    async () => {
      const [target, source] = [await createDatabase(), await createDatabase()];
      dbs.push(target, source);
      return postgresForgeryTarget(target.url, source.url);
    },
    Object.fromEntries(FORGERIES.map((f) => [f.name, 'refused'])),
  );
});

describe('R9.4 keyed forgeries with the runtime role on PostgreSQL (no key): accepted by the database, detected by every keyed read and by verify', function () {
  this.timeout(120_000);
  const dbs: TestDatabase[] = [];
  keyedForgerySuite(async () => {
    const db = await createDatabase();
    dbs.push(db);
    return openKeyedForgeryTarget('postgres', db.url);
  });
  after(async () => {
    for (const db of dbs) await db.drop(); // after the suite's own hook has closed its pools
  });
});

describe('R9.1 a history refusal on the runtime\'s own path is typed (PostgreSQL)', () => {
  it('R9.1 the event trigger\'s refusal (SQLSTATE Q3H01) maps to CORRUPT_RECORD, never a raw driver error', async () => {
    const db = await createDatabase();
    const a = await openPostgresStartBarrier({ connectionString: db.url });
    try {
      const s = buildScenario();
      for (const c of s.lifecycle) await a.runs.handle(c);
      // a StepRunReady for a StepRun that is already ready: a move the lifecycle does not allow
      const raw = await a.pool
        .query(
          `INSERT INTO ql3.events (stream_id, stream_position, event_id, event_type, data_json, committed_at_ms)
           SELECT $1, version + 1, 'forged-ready', 'StepRunReady', $2, (extract(epoch FROM transaction_timestamp()) * 1000)::bigint FROM ql3.streams WHERE stream_id = $1`,
          [`run-${s.runId}`, JSON.stringify({ occurredAtMs: 3, runId: s.runId, stepRunId: s.stepRunId, stepRunVersion: 3 })],
        )
        .then(() => undefined, (e: unknown) => e);
      const mapped = mapTimeout(raw);
      expect(mapped, String(raw)).to.be.instanceOf(CorruptRecordError);
      expect((mapped as Error).message).to.contain('cannot move from ready by StepRunReady');
    } finally {
      await a.close();
      await db.drop();
    }
  });
});
