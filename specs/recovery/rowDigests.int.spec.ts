import { expect } from 'chai';
import { CorruptRecordError } from '../../domain';
import { claimDigestOf, checkedClaimRows, claimHistoryProblems, claimRowOf, memoryDriverClaims } from '../../application/driverClaimRules';
import { purgeDigestOf, purgeProblemOf } from '../../application/recoveryRules';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { openPostgresStartBarrier } from '../../infrastructure/postgres/postgresAuthority';
import { openSqliteStartBarrier, type SqliteStartBarrier } from '../../infrastructure/sqlite';
import { freshDbPath } from '../support/tmp';
import { MigratedTemplate, type TestDatabase } from '../../testkit/postgresHarness';
import { openFreshSqlite } from '../sqlite/support';
import { rejects, startedScenario } from './recoveryConformance';
import type Database from 'better-sqlite3';
import { withTriggersDropped } from '../../testkit/damage';

// R9.2: the cells nothing bound before (a driver claim's driver and times, a note's purge
// time, a migration ledger row's time, SQLite's global event order) are now bound, so one
// changed cell fails the claim read closed and `verify` reports it, on every backend it
// concerns. Damage is made past the database's guards, as the corruption sweep makes it.

type Damage = (sql: string) => Promise<void>;

const kindsOf = async (a: RecoverableStartBarrierAuthority) => (await a.recovery.verify()).problems.map((p) => p.kind);

/** A started start with a claimed-and-released generation, a live claim, and a purged note. */
const populated = async (a: RecoverableStartBarrierAuthority) => {
  const { startId } = await startedScenario(a);
  const claims = a.driverClaims();
  try {
    const one = await claims.claim(startId, 'driver-1', 60_000);
    if (one.status === 'claimed') await claims.release(one.claim);
    expect((await claims.claim(startId, 'driver-2', 60_000)).status).to.equal('claimed');
  } finally {
    await claims.close();
  }
  await a.recovery.resolve(startId, 'completed', { decidedBy: 'ops', reason: 'tool_succeeded', note: 'to be purged' });
  await a.recovery.purgeNote(startId);
  expect((await a.recovery.verify()).ok).to.equal(true);
  return startId;
};

const rowDigestSuite = (name: string, open: () => Promise<{ a: RecoverableStartBarrierAuthority; damage: Damage; claimRows: (startId: string) => Promise<number>; table: (t: string) => string; close: () => Promise<void> }>) =>
  describe(`R9.2 row digests on ${name}`, function () {
    this.timeout(60_000);
    let h: Awaited<ReturnType<typeof open>>;
    beforeEach(async () => {
      h = await open();
    });
    afterEach(() => h.close());

    for (const [column, value] of [['driver_id', "'driver-9'"], ['at_ms', 'at_ms - 1'], ['lease_until_ms', 'lease_until_ms + 1']] as const) {
      it(`a changed ${column} of a claim not yet released fails the claim read closed and verify reports it`, async () => {
        const startId = await populated(h.a);
        await h.damage(`UPDATE ${h.table('adapter_driver_claims')} SET ${column} = ${value} WHERE start_id = '${startId}' AND generation = 2`);
        const claims = h.a.driverClaims();
        try {
          expect(await rejects(claims.history(startId))).to.be.instanceOf(CorruptRecordError);
          expect(await rejects(claims.claim(startId, 'driver-3', 60_000))).to.be.instanceOf(CorruptRecordError);
        } finally {
          await claims.close();
        }
        expect(await kindsOf(h.a)).to.include('driver_claim');
      });
    }

    // R9.3: a row gone from the middle of a claim history is damage on the claim read as in verify,
    // never a holder or a free generation to decide on. (The last row gone leaves a history that
    // reads whole: README, "What the key does not seal".)
    for (const [gone, where] of [
      ['the claim row of generation 1', "generation = 1 AND kind = 'claim'"],
      ['the release row of generation 1 (generation 2 then held while generation 1 did)', "generation = 1 AND kind = 'release'"],
    ] as const) {
      it(`R9.3 ${gone} deleted: the claim read fails closed, nothing is written, verify reports it`, async () => {
        const startId = await populated(h.a);
        await h.damage(`DELETE FROM ${h.table('adapter_driver_claims')} WHERE start_id = '${startId}' AND ${where}`);
        const before = await h.claimRows(startId);
        const claims = h.a.driverClaims();
        try {
          for (const call of [() => claims.history(startId), () => claims.claim(startId, 'driver-3', 60_000), () => claims.release({ startId, driverId: 'driver-2', generation: 2, leaseUntilMs: 0 })]) {
            const e = await rejects(call());
            expect(e).to.be.instanceOf(CorruptRecordError);
            expect((e as Error).message).to.match(/driver claim/);
          }
        } finally {
          await claims.close();
        }
        expect(await h.claimRows(startId)).to.equal(before);
        const rows = await h.a.recovery.verify();
        expect([...new Set(rows.problems.filter((p) => p.kind === 'driver_claim').map((p) => p.record))]).to.deep.equal([startId]);
      });
    }

    it("a changed purge time of a note is a difference verify reports, and the note's read fails closed", async () => {
      const startId = await populated(h.a);
      await h.damage(`UPDATE ${h.table('resolution_notes')} SET purged_at_ms = purged_at_ms + 1 WHERE start_id = '${startId}'`);
      expect(await rejects(h.a.recovery.note(startId))).to.be.instanceOf(CorruptRecordError);
      expect((await h.a.recovery.verify()).ok).to.equal(false);
    });

    it('R10.2 R9.3 a bound note whose digest cell was changed (its text still the bound note): purge-note fails closed and writes nothing, the text kept', async () => {
      const { startId } = await startedScenario(h.a);
      await h.a.recovery.resolve(startId, 'completed', { decidedBy: 'ops', reason: 'tool_succeeded', note: 'the only copy' });
      const before = (await h.a.recovery.note(startId))!;
      expect(before.status).to.equal('present');
      const set = (digest: string) => h.damage(`UPDATE ${h.table('resolution_notes')} SET note_digest = '${digest}' WHERE start_id = '${startId}'`);
      await set(`sha256:${'0'.repeat(64)}`);
      expect(await rejects(h.a.recovery.purgeNote(startId))).to.be.instanceOf(CorruptRecordError);
      expect(await rejects(h.a.recovery.note(startId))).to.be.instanceOf(CorruptRecordError);
      await set(before.noteDigest);
      expect(await h.a.recovery.note(startId)).to.deep.equal(before);
      expect((await h.a.recovery.verify()).ok).to.equal(true);
    });

    if (name === 'SQLite') it('R10.2 a note that holds its text and a purge time (its CHECK ignored): the note read fails closed and verify reports it', async () => {
      const { startId } = await startedScenario(h.a);
      await h.a.recovery.resolve(startId, 'completed', { decidedBy: 'ops', reason: 'tool_succeeded', note: 'still here' });
      await h.damage(`PRAGMA ignore_check_constraints = ON; UPDATE resolution_notes SET purged_at_ms = 5 WHERE start_id = '${startId}'; PRAGMA ignore_check_constraints = OFF`);
      expect(await rejects(h.a.recovery.note(startId))).to.be.instanceOf(CorruptRecordError);
      expect(await rejects(h.a.recovery.purgeNote(startId))).to.be.instanceOf(CorruptRecordError);
      expect((await h.a.recovery.verify()).problems.map((p) => p.problem).join('\n')).to.match(/holds its text and a purge time/);
    });

    it('a changed applied_at_ms of a migration ledger row is a schema difference', async () => {
      await populated(h.a);
      await h.damage(`UPDATE ${h.table('schema_migrations')} SET applied_at_ms = applied_at_ms + 1 WHERE name = (SELECT min(name) FROM ${h.table('schema_migrations')})`);
      expect(await kindsOf(h.a)).to.include('schema');
    });
  });

rowDigestSuite('SQLite', async () => {
  const a: SqliteStartBarrier = await openFreshSqlite();
  return {
    a,
    damage: async (sql) => {
      const guards = ['adapter_driver_claims_no_update', 'adapter_driver_claims_no_delete', 'resolution_notes_purge_only'];
      withTriggersDropped(a.db as Database.Database, (t) => guards.includes(t.name), () => a.db.exec(sql));
    },
    claimRows: async (startId) => (a.db.prepare('SELECT count(*) AS n FROM adapter_driver_claims WHERE start_id = ?').get(startId) as { n: number }).n,
    table: (t) => t,
    close: () => a.close(),
  };
});

describe('R9.2 row digests on PostgreSQL', () => {
  const template = new MigratedTemplate();
  after(() => template.dropAll());
  let db: TestDatabase;
  rowDigestSuite('PostgreSQL (fresh database)', async () => {
    db = await template.clone();
    const a = await openPostgresStartBarrier({ connectionString: db.url });
    return {
      a,
      damage: (sql) => db.admin(async (c) => void (await c.query(`SET session_replication_role = replica; ${sql}; SET session_replication_role = origin`))),
      claimRows: (startId) => db.admin(async (c) => Number((await c.query('SELECT count(*) AS n FROM ql3.adapter_driver_claims WHERE start_id = $1', [startId])).rows[0].n)),
      table: (t) => `ql3.${t}`,
      close: async () => {
        await a.close();
        await db.drop();
      },
    };
  });
});

describe('R9.2 SQLite global event order: dense 1..N and following each stream', function () {
  this.timeout(60_000);
  let a: SqliteStartBarrier;
  beforeEach(async () => {
    a = await openFreshSqlite();
    await startedScenario(a);
    await startedScenario(a);
    expect((await a.recovery.verify()).ok).to.equal(true);
  });
  afterEach(() => a.close());
  const damage = (sql: string) => {
    for (const r of a.db.prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'events'").all() as { name: string }[]) a.db.exec(`DROP TRIGGER ${r.name}`);
    a.db.exec(sql);
  };

  it('the last event moved past the end leaves a gap: verify reports it', async () => {
    damage('UPDATE events SET global_position = global_position + 5 WHERE global_position = (SELECT max(global_position) FROM events)');
    const problems = (await a.recovery.verify()).problems;
    expect(problems.some((p) => p.kind === 'event' && /not 1\.\.\d+/.test(p.problem))).to.equal(true);
  });

  it('two events of one stream swapped in the global order: verify reports it', async () => {
    damage(`UPDATE events SET global_position = -global_position WHERE global_position IN (1, 2);
      UPDATE events SET global_position = 2 WHERE global_position = -1; UPDATE events SET global_position = 1 WHERE global_position = -2`);
    const problems = (await a.recovery.verify()).problems;
    expect(problems.some((p) => p.kind === 'event' && /not after/.test(p.problem))).to.equal(true);
  });
});

describe('R9.2 row digests in memory (the rules every backend shares)', () => {
  it('a claim row binds its start, generation, kind, driver and times; the claim read refuses a changed one', async () => {
    const row = claimRowOf('s-1', 1, 'claim', 'driver-1', 1_000, 61_000);
    expect(row.claim_digest).to.equal(claimDigestOf(row));
    for (const changed of [{ driver_id: 'driver-2' }, { at_ms: 999 }, { lease_until_ms: 61_001 }, { generation: 2 }, { claim_digest: claimDigestOf({ ...row, at_ms: 1 }) }]) {
      expect(() => checkedClaimRows([{ ...row, ...changed }])).to.throw(CorruptRecordError);
      expect(claimHistoryProblems([{ ...row, ...changed }]).map((p) => p.kind)).to.include('driver_claim');
    }
    const claims = memoryDriverClaims(() => 1_000);
    const c = await claims.claim('s-1', 'driver-1', 60_000);
    expect(c.status).to.equal('claimed');
    expect(await claims.history('s-1')).to.have.length(1);
  });

  it('a purged note binds its purge time', () => {
    const row = { start_id: 's-1', note_digest: `sha256:${'ab'.repeat(32)}`, note_text: null, purged_at_ms: 5, purge_digest: purgeDigestOf('s-1', `sha256:${'ab'.repeat(32)}`, 5) };
    expect(purgeProblemOf(row)).to.equal(undefined);
    expect(purgeProblemOf({ ...row, purged_at_ms: 6 })).to.match(/purge_digest/);
    expect(purgeProblemOf({ ...row, purge_digest: null })).to.match(/purge_digest/);
    expect(purgeProblemOf({ ...row, note_text: 'text', purged_at_ms: null, purge_digest: null })).to.equal(undefined);
    expect(purgeProblemOf({ ...row, note_text: 'text' })).to.match(/holds its text and a purge/);
  });
});

describe('R9.4/R9.2 seal origin on SQLite: the first keyed transaction is sealed, its origin bound', function () {
  this.timeout(60_000);
  const keys = { active: { id: 'k1', secret: Buffer.alloc(32, 0x4b) } };
  let a: SqliteStartBarrier;
  beforeEach(async () => {
    a = await openSqliteStartBarrier({ path: freshDbPath(), evidenceKeys: keys });
    await startedScenario(a);
    expect((await a.recovery.verify()).ok).to.equal(true);
    a.db.exec('DROP TRIGGER IF EXISTS run_event_macs_no_update; DROP TRIGGER IF EXISTS run_event_seal_origins_no_update');
  });
  afterEach(() => a.close());

  it("the seal of the store's first transaction moved to another stream leaves its events unsealed, not legacy: verify reports it", async () => {
    a.db.exec("UPDATE run_event_macs SET stream_id = stream_id || 'x' WHERE from_position = 1");
    expect((await a.recovery.verify()).ok).to.equal(false);
  });

  it('the seal origin renamed to a key id no key holds, beside seals the active key verifies: verify reports it', async () => {
    a.db.exec("UPDATE run_event_seal_origins SET key_id = 'k9'");
    expect((await a.recovery.verify()).ok).to.equal(false);
  });
});
