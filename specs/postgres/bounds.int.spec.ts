import { expect } from 'chai';
import { Client } from 'pg';
import { ConcurrencyExhaustedError, StoreUnavailableError, TransactionTimeoutError } from '../../domain';
import { ConnectionError, openPostgresStartBarrier, type PostgresStartBarrier, type PostgresStartBarrierOptions } from '../../infrastructure/postgres';
import { buildScenario, type Scenario } from '../../domain/scenario';
import { startFreezableProxy, type FreezableProxy } from '../../testkit/freezableProxy';
import { countRows, createDatabase, openOn, rejects } from '../../testkit/postgresHarness';
import { holdingAdvisoryLocks, sharedStore, withStranger } from './sharedStore';
import { buildOnce, runCli } from '../cli/cliSuite';

// R13.1 on the real server: every public PostgreSQL operation ends within its bound, at most
// 1 + 3 write transactions (every BEGIN counted, lost turns of the Run included) and the
// caller's deadline, then a typed error with nothing written. Shown per operation under
// contention (16 writers on one Run) and while a login with no ql3 rights holds every lock it
// can take, and while a runtime login holds the start gate. Timing is never asserted: a short
// deadline and lock timeout make any wait on such a lock a failure instead.

const WRITERS = 16;
const BUDGET = 4; // 1 + 3

/** The end of one operation: its outcome, or the typed error's code. */
const ending = async (p: Promise<unknown>): Promise<string> => {
  try {
    const r = await p;
    return typeof r === 'object' && r !== null && 'outcome' in r ? String((r as { outcome: unknown }).outcome) : 'ok';
  } catch (e) {
    if (e instanceof ConcurrencyExhaustedError || e instanceof TransactionTimeoutError || e instanceof StoreUnavailableError) return e.code;
    throw e;
  }
};

describe('PostgreSQL bounded operations (R13.1)', function () {
  this.timeout(180_000);
  const store = sharedStore({ onError: () => undefined });
  const { ready: setUp, stepRunsOfOneRun } = store;
  /** The highest write-transaction count any one operation of the racers reached. */
  let most = 0;
  beforeEach(() => {
    most = 0;
  });

  /** `n` authorities, each with its own pool, counting every BEGIN of each operation. */
  const racers = (n: number, options: Partial<PostgresStartBarrierOptions> = {}): Promise<PostgresStartBarrier[]> =>
    store.clients(n, { onError: () => undefined, hooks: { onAttempt: (k) => void (most = Math.max(most, k)) }, ...options });

  describe('under contention: 16 writers on one Run', () => {
    it('R13.1 prepare: each start is created or ends typed, with at most 1 + 3 write transactions, lost turns included; a failed one wrote nothing', async () => {
      const s = await setUp();
      const commands = await stepRunsOfOneRun(s, WRITERS, 'p');
      const list = await racers(WRITERS);
      const ends = await Promise.all(list.map((a, i) => ending(a.barriers.prepare(commands[i]!))));
      expect(most).to.be.within(1, BUDGET);
      expect(ends.filter((e) => e === 'created').length).to.be.above(0);
      for (const e of ends) expect(['created', 'CONCURRENCY_EXHAUSTED', 'TRANSACTION_TIMEOUT']).to.include(e);
      for (const [i, e] of ends.entries()) {
        const barrier = await store.main.barriers.getByStartId(commands[i]!.startId);
        expect(barrier === null, `start ${i} ended ${e}`).to.equal(e !== 'created');
      }
    });

    it('R13.1 R4.2 prepare, one command: 16 exact replays racing on one Run: exactly one created, fifteen existing (read, not written), each within 1 + 3 write transactions', async () => {
      const s = await setUp();
      const command = s.startCommand();
      const list = await racers(WRITERS);
      const ends = await Promise.all(list.map((a) => ending(a.barriers.prepare(command))));
      expect(ends.filter((e) => e === 'created'), ends.join(', ')).to.have.length(1);
      expect(ends.filter((e) => e === 'existing'), ends.join(', ')).to.have.length(WRITERS - 1);
      expect(most).to.be.within(1, BUDGET);
    });

    it('R13.1 R2.1 runs.handle, one command: 16 CreateRun of one Run: one appended, fifteen run_exists (decided on a read), each within 1 + 3 write transactions', async () => {
      const s = buildScenario();
      const list = await racers(WRITERS);
      const ends = await Promise.all(list.map((a) => ending(a.runs.handle(s.lifecycle[0]!)).catch((e: { reason?: string }) => e.reason ?? String(e))));
      expect(ends.filter((e) => e === 'ok'), ends.join(', ')).to.have.length(1);
      expect(ends.filter((e) => e === 'run_exists'), ends.join(', ')).to.have.length(WRITERS - 1);
      expect(most).to.be.within(1, BUDGET);
    });

    it('R13.1 runs.handle: 16 lifecycle commands on one Run, each appended or typed, at most 1 + 3 write transactions each', async () => {
      const s = await setUp();
      const list = await racers(WRITERS);
      const ends = await Promise.all(
        list.map((a, i) => ending(a.runs.handle({ type: 'CreateStepRun', data: { runId: s.runId, stepRunId: `${s.stepRunId}-h${i}`, kind: 'tool', toolDefinition: s.stepRun.toolDefinition!, requestedAtMs: 1 } }))),
      );
      expect(most).to.be.within(1, BUDGET);
      for (const e of ends) expect(['ok', 'CONCURRENCY_EXHAUSTED', 'TRANSACTION_TIMEOUT']).to.include(e);
      const stream = await store.main.runs.readStream(s.runId);
      expect(stream.length).to.equal(3 + ends.filter((e) => e === 'ok').length);
    });

    it('R13.1 recovery.resolve (with a note) and note purge: 16 resolutions of starts of one Run, each recorded or typed, at most 1 + 3 write transactions each', async () => {
      const s = await setUp();
      const commands = await stepRunsOfOneRun(s, WRITERS, 'r');
      for (const c of commands) await store.main.barriers.prepare(c);
      const list = await racers(WRITERS);
      const ends = await Promise.all(
        list.map((a, i) => ending(a.recovery.resolve(commands[i]!.startId, 'lost', { decidedBy: 'ops', reason: 'worker_lost', note: `note ${i}` }).then((r) => ({ outcome: r.status })))),
      );
      expect(most).to.be.within(1, BUDGET);
      for (const e of ends) expect(['recorded', 'CONCURRENCY_EXHAUSTED', 'TRANSACTION_TIMEOUT']).to.include(e);
      // a note is purged where its outcome was recorded (elsewhere the failed resolve purged its orphan itself)
      const purged = await Promise.all(list.map((a, i) => (ends[i] === 'recorded' ? ending(a.recovery.purgeNote(commands[i]!.startId)) : Promise.resolve('ok'))));
      for (const e of purged) expect(['ok', 'CONCURRENCY_EXHAUSTED', 'TRANSACTION_TIMEOUT']).to.include(e);
    });

    it('R13.1 driver claims: 16 drivers claim one start: one claims it, fifteen read it held (each within four transactions by construction)', async () => {
      const s = await setUp();
      const [command] = await stepRunsOfOneRun(s, 1, 'c');
      await store.main.barriers.prepare(command!);
      const list = await racers(WRITERS);
      const results = await Promise.all(list.map((a, i) => a.driverClaims().claim(command!.startId, `driver-${i}`, 60_000).then((r) => r.status, (e: unknown) => (e as { code?: string }).code)));
      // one race on the primary key (start, generation), then each loser reads the winner's lease
      expect(results.filter((r) => r === 'claimed'), results.join(', ')).to.have.length(1);
      expect(results.filter((r) => r === 'held'), results.join(', ')).to.have.length(WRITERS - 1);
    });

    it('R13.1 driver claims take the authority\'s timeouts: a claim waiting on a lock ends by the caller\'s statement timeout (its lock timeout set longer), typed, nothing written', async () => {
      const s = await setUp();
      const [command] = await stepRunsOfOneRun(s, 1, 't');
      await store.main.barriers.prepare(command!);
      const [a] = await racers(1, { timeouts: { statementMs: 1_500, lockMs: 60_000 } });
      await store.db.admin(async (holder) => {
        await holder.query('BEGIN');
        await holder.query('LOCK TABLE ql3.adapter_driver_claims IN ACCESS EXCLUSIVE MODE');
        try {
          const error = await rejects(a!.driverClaims().claim(command!.startId, 'driver-t', 60_000));
          expect(error, error.message).to.be.instanceOf(TransactionTimeoutError);
          expect((error as TransactionTimeoutError).timeout).to.equal('statement');
        } finally {
          await holder.query('ROLLBACK');
        }
      });
      expect((await store.main.driverClaims().history(command!.startId)).length).to.equal(0);
    });

    it('R13.1 CLI migrate and verify while 16 writers start on one Run: both exit 0, each start created or typed within 1 + 3 write transactions', async () => {
      const s = await setUp();
      const commands = await stepRunsOfOneRun(s, WRITERS, 'm');
      const list = await racers(WRITERS);
      buildOnce();
      const starts = Promise.all(list.map((a, i) => ending(a.barriers.prepare(commands[i]!))));
      for (const args of [['migrate'], ['verify']]) {
        const r = await runCli([...args, '--postgres', store.db.url]);
        expect(r.code, `${args[0]}: ${r.stderr}\n${r.stdout}`).to.equal(0);
      }
      for (const e of await starts) expect(['created', 'CONCURRENCY_EXHAUSTED', 'TRANSACTION_TIMEOUT']).to.include(e);
      expect(most).to.be.within(1, BUDGET);
    });

    it('R13.1 open with and without migrate: 16 opens of one database at once all open (the migration lock is the ledger table, each wait within the deadline)', async () => {
      const fresh = await createDatabase();
      try {
        const opens = await Promise.all(
          Array.from({ length: WRITERS }, () => openPostgresStartBarrier({ connectionString: fresh.url, migrate: true, onError: () => undefined, timeouts: { deadlineMs: 60_000 } })),
        );
        for (const a of opens) await a.close();
        const reopened = await Promise.all(Array.from({ length: WRITERS }, (_, i) => openPostgresStartBarrier({ connectionString: fresh.url, migrate: i % 2 === 0, onError: () => undefined })));
        for (const a of reopened) await a.close();
      } finally {
        await fresh.drop();
      }
    });
  });

  describe('under a lock an unrelated login holds', () => {
    /** A role with CONNECT only on the test database, holding every lock such a login can take, while `body` runs. */
    const whileAStrangerHoldsLocks = (s: Scenario, body: () => Promise<void>): Promise<void> =>
      withStranger(store.db, 'ql3_spec_bound', (stranger) =>
        // the former Run queue and migration keys, and any key at all: a session lock each
        holdingAdvisoryLocks(store.db, stranger, s.runId, ['SELECT pg_advisory_lock(7433267, hashtext($1))', 'SELECT pg_advisory_lock(7173100158)', 'SELECT pg_advisory_lock(hashtext($1))'], async (holder) => {
          // ql3 objects it cannot lock at all
          for (const table of ['ql3.schema_migrations', 'ql3.runs', 'ql3.start_gate']) {
            const code = await holder
              .query('BEGIN')
              .then(() => holder.query(`LOCK TABLE ${table} IN ACCESS SHARE MODE NOWAIT`))
              .then(
                () => 'locked',
                (e: { code?: string }) => e.code,
              );
            await holder.query('ROLLBACK');
            expect(code, table).to.equal('42501');
          }
          await body();
        }),
      );

    it('R13.1 prepare, runs.handle, recovery.resolve, note purge, driver claims, open with and without migrate, CLI migrate and verify: none waits on it (a wait would end the short deadline)', async () => {
      const s = await setUp();
      const commands = await stepRunsOfOneRun(s, 2, 'x');
      await whileAStrangerHoldsLocks(s, async () => {
        const short = { timeouts: { lockMs: 200, deadlineMs: 3000 } };
        const [a] = await racers(1, short);
        expect((await a!.barriers.prepare(commands[0]!)).outcome).to.equal('created');
        await a!.runs.handle({ type: 'CreateStepRun', data: { runId: s.runId, stepRunId: `${s.stepRunId}-x-new`, kind: 'tool', toolDefinition: s.stepRun.toolDefinition!, requestedAtMs: 1 } });
        expect((await a!.recovery.resolve(commands[0]!.startId, 'lost', { decidedBy: 'ops', reason: 'worker_lost', note: 'n' })).status).to.equal('recorded');
        await a!.recovery.purgeNote(commands[0]!.startId);
        await store.main.barriers.prepare(commands[1]!);
        expect((await a!.driverClaims().claim(commands[1]!.startId, 'driver-x', 60_000)).status).to.equal('claimed');
        for (const migrate of [true, false]) {
          const b = await openOn(store.db, { migrate, onError: () => undefined, ...short });
          await b.close();
        }
        buildOnce();
        for (const args of [['migrate'], ['verify'], ['in-doubt']]) {
          const r = await runCli([...args, '--postgres', store.db.url, '--lock-timeout', '200']);
          expect(r.code, `${args[0]}: ${r.stderr}`).to.equal(0);
        }
      });
    });

    it('R13.1 a runtime login holding the start gate: prepare, runs.handle and recovery.resolve end typed within 1 + 3 write transactions, nothing written (they used to retry without end)', async () => {
      const s = await setUp();
      const [command, resolvable] = await stepRunsOfOneRun(s, 2, 'g');
      await store.main.barriers.prepare(resolvable!);
      const login = `ql3_spec_gate_${process.pid}_${Date.now()}`;
      await store.db.admin((c) => c.query(`CREATE ROLE ${login} NOLOGIN IN ROLE ql3_runtime`));
      try {
        const [a] = await racers(1, { timeouts: { lockMs: 150, deadlineMs: 10_000 } });
        const before = await countRows(store.main.pool);
        await store.db.admin(async (holder) => {
          await holder.query(`SET ROLE ${login}`);
          await holder.query('BEGIN');
          await holder.query('LOCK TABLE ql3.start_gate IN ACCESS EXCLUSIVE MODE');
          try {
            for (const op of [
              () => a!.barriers.prepare(command!),
              () => a!.runs.handle({ type: 'CreateStepRun', data: { runId: s.runId, stepRunId: `${s.stepRunId}-g-new`, kind: 'tool', toolDefinition: s.stepRun.toolDefinition!, requestedAtMs: 1 } }),
              () => a!.recovery.resolve(resolvable!.startId, 'lost', { decidedBy: 'ops', reason: 'worker_lost' }),
            ]) {
              most = 0;
              const e = await rejects(op());
              expect(e, String(e)).to.satisfy((x: unknown) => x instanceof TransactionTimeoutError || x instanceof ConcurrencyExhaustedError);
              expect(most).to.be.within(1, BUDGET);
            }
          } finally {
            await holder.query('ROLLBACK');
            await holder.query('RESET ROLE');
          }
        });
        expect(await countRows(store.main.pool)).to.deep.equal(before);
      } finally {
        await store.db.admin((c) => c.query(`DROP ROLE ${login}`));
      }
    });

    it('R13.1 the deadline: past timeouts.deadlineMs an operation ends TRANSACTION_TIMEOUT (deadline) with nothing written', async () => {
      const s = await setUp();
      const [command] = await stepRunsOfOneRun(s, 1, 'd');
      const [a] = await racers(1, { timeouts: { lockMs: 60_000, deadlineMs: 300 } });
      const before = await countRows(store.main.pool);
      await store.db.admin(async (holder) => {
        await holder.query('BEGIN');
        await holder.query('SELECT 1 FROM ql3.runs WHERE run_id = $1 FOR UPDATE', [s.runId]);
        try {
          const e = await rejects(a!.barriers.prepare(command!));
          expect(e, String(e)).to.be.instanceOf(TransactionTimeoutError);
          expect((e as TransactionTimeoutError).timeout).to.be.oneOf(['deadline', 'lock']);
        } finally {
          await holder.query('ROLLBACK');
        }
      });
      expect(await countRows(store.main.pool)).to.deep.equal(before);
      expect((await a!.barriers.prepare(command!)).outcome).to.equal('created');
    });

    it('R13.1 open with migrate waits for a migrator holding the ledger lock no longer than its deadline: TRANSACTION_TIMEOUT (deadline); deadlineMs is validated', async () => {
      const holder = new Client({ connectionString: store.db.url });
      await holder.connect();
      try {
        await holder.query('BEGIN');
        await holder.query('LOCK TABLE ql3.schema_migrations IN ACCESS EXCLUSIVE MODE');
        const e = await rejects(openOn(store.db, { migrate: true, onError: () => undefined, timeouts: { deadlineMs: 300 } }));
        expect(e, String(e)).to.satisfy((x: unknown) => x instanceof TransactionTimeoutError || x instanceof StoreUnavailableError);
      } finally {
        await holder.query('ROLLBACK');
        await holder.end();
      }
      expect(await rejects(openOn(store.db, { timeouts: { deadlineMs: 0 } }))).to.be.instanceOf(RangeError);
    });

    it('R13.1 CLI migrate on a frozen server ends (exit 7), never hangs', async () => {
      let proxy: FreezableProxy | undefined;
      try {
        proxy = await startFreezableProxy('127.0.0.1', Number(new URL(store.db.url).port || 5432));
        const url = new URL(store.db.url);
        url.port = String(proxy.port);
        proxy.freeze();
        buildOnce();
        const r = await runCli(['migrate', '--postgres', url.toString()]);
        expect(r.code, r.stderr).to.equal(7);
        expect(r.stderr).to.match(/CONNECTION_FAILED|STORE_UNAVAILABLE/);
        expect(await rejects(openPostgresStartBarrier({ connectionString: url.toString(), timeouts: { connectMs: 300 } }))).to.be.instanceOf(ConnectionError);
      } finally {
        proxy?.thaw();
        await proxy?.close();
      }
    });
  });
});
