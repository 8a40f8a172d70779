import { expect } from 'chai';
import { Pool } from 'pg';
import { claimDigestOf, claimRowOf, claimValuesOf } from '../../application/driverClaimRules';
import { CorruptRecordError } from '../../domain';
import { buildScenario } from '../../domain/scenario';
import { openPostgresStartBarrier } from '../../infrastructure/postgres';
import { mapTimeout } from '../../infrastructure/postgres/errors';
import { FORGERIES } from '../../testkit/forgery';
import { postgresForgeryTarget } from '../../testkit/forgeryTargets';
import { createDatabase, type TestDatabase } from '../../testkit/postgresHarness';
import { compactionForgerySuite, forgerySuite, keyedForgerySuite, keyingWindowSuite } from '../conformance/forgeryConformance';
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

describe('R14.2 compaction forgeries with the runtime role on PostgreSQL: refused by the grants and the delete guards (accepted 0)', function () {
  this.timeout(120_000);
  const dbs: TestDatabase[] = [];
  after(async () => {
    for (const db of dbs) await db.drop();
  });
  compactionForgerySuite(async () => {
    const [target, source] = [await createDatabase(), await createDatabase()];
    dbs.push(target, source);
    return postgresForgeryTarget(target.url, source.url);
  });
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

describe('R14.1 keying window forgeries with a second runtime session on PostgreSQL (a transaction held open across keying): refused or detected, accepted 0', function () {
  this.timeout(120_000);
  const dbs: TestDatabase[] = [];
  after(async () => {
    for (const db of dbs) await db.drop();
  });
  keyingWindowSuite('postgres', async () => {
    const db = await createDatabase();
    dbs.push(db);
    await (await openPostgresStartBarrier({ connectionString: db.url })).close(); // migrated, never keyed
    return db.url;
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

describe('R11.2 racing claimers meet the primary key, never the claim rules (PostgreSQL)', function () {
  this.timeout(60_000);
  it('R11.2 a claimer that read before a racer committed gets a unique violation for its generation (it reads again: held), not CORRUPT_RECORD; eight concurrent claimers: one claims, seven are told who holds it', async () => {
    const db = await createDatabase();
    const a = await openPostgresStartBarrier({ connectionString: db.url });
    try {
      const started = async () => {
        const s = buildScenario();
        for (const c of s.lifecycle) await a.runs.handle(c);
        return (await a.barriers.prepare(s.startCommand())).barrier.record.startId;
      };
      const startId = await started();
      const late = await a.pool.connect();
      const claims = a.driverClaims();
      try {
        await late.query('BEGIN');
        const now = Number((await late.query("SELECT (extract(epoch FROM transaction_timestamp()) * 1000)::bigint AS t")).rows[0].t);
        expect((await late.query('SELECT 1 FROM ql3.adapter_driver_claims WHERE start_id = $1', [startId])).rowCount).to.equal(0);
        expect((await claims.claim(startId, 'driver-a', 60_000)).status).to.equal('claimed'); // the racer commits generation 1
        const row = claimRowOf(startId, 1, 'claim', 'driver-b', now, now + 60_000);
        const e = await late.query('INSERT INTO ql3.adapter_driver_claims (start_id, generation, kind, driver_id, at_ms, lease_until_ms, claim_digest) VALUES ($1, $2, $3, $4, $5, $6, $7)', claimValuesOf(row)).then(() => undefined, (err: unknown) => err as { code?: string; constraint?: string });
        expect(e?.code, JSON.stringify(e)).to.equal('23505');
        expect(e?.constraint).to.equal('adapter_driver_claims_pkey');
        await late.query('ROLLBACK');
        for (let round = 0; round < 5; round++) {
          const id = await started();
          const results = await Promise.all(Array.from({ length: 8 }, (_, i) => claims.claim(id, `driver-${i}`, 60_000)));
          expect(results.filter((r) => r.status === 'claimed')).to.have.length(1);
          expect(results.filter((r) => r.status === 'held')).to.have.length(7);
        }
      } finally {
        late.release();
        await claims.close();
      }
    } finally {
      await a.close();
      await db.drop();
    }
  });
});

describe('R11.2/R9.1 a driver claim row the runtime writes binds its cells and the clock (PostgreSQL)', () => {
  it('R9.1 a claim backdated an hour (its digest over the backdated cells), or with a digest over other cells, is refused; the product\'s own claim goes in', async () => {
    const db = await createDatabase();
    const a = await openPostgresStartBarrier({ connectionString: db.url });
    const runtime = new Pool({ connectionString: db.url, options: '-c role=ql3_runtime', max: 1 });
    try {
      const s = buildScenario();
      for (const c of s.lifecycle) await a.runs.handle(c);
      const startId = (await a.barriers.prepare(s.startCommand())).barrier.record.startId;
      const insert = async (atShiftMs: number, digestOf: (r: ReturnType<typeof claimRowOf>) => string) => {
        const c = await runtime.connect();
        try {
          await c.query('BEGIN');
          const now = Number((await c.query("SELECT (extract(epoch FROM transaction_timestamp()) * 1000)::bigint AS t")).rows[0].t) + atShiftMs;
          const row = claimRowOf(startId, 1, 'claim', 'driver-1', now, now + 60_000);
          await c.query('INSERT INTO ql3.adapter_driver_claims (start_id, generation, kind, driver_id, at_ms, lease_until_ms, claim_digest) VALUES ($1, $2, $3, $4, $5, $6, $7)',
            [...claimValuesOf(row).slice(0, 6), digestOf(row)]);
          await c.query('COMMIT');
          return 'written';
        } catch (e) {
          await c.query('ROLLBACK');
          return e instanceof Error ? e.message : String(e);
        } finally {
          c.release();
        }
      };
      expect(await insert(-3_600_000, (r) => r.claim_digest!)).to.match(/illegal history refused: .*at_ms is not the transaction clock/);
      expect(await insert(0, (r) => claimDigestOf({ ...r, driver_id: 'driver-2' }))).to.match(/illegal history refused: .*claim_digest does not bind its cells/);
      const claims = a.driverClaims();
      try {
        expect((await claims.claim(startId, 'driver-1', 60_000)).status).to.equal('claimed');
      } finally {
        await claims.close();
      }
    } finally {
      await runtime.end();
      await a.close();
      await db.drop();
    }
  });
});
