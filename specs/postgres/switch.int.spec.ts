import { inspect } from 'node:util';
import { expect } from 'chai';
import { Pool } from 'pg';
import { StoreUnavailableError, type ToolExecutionStartCommand } from '../../domain';
import type { StartStepHook } from '../../application/authority';
import { ConnectionError, openPostgresStartBarrier, settleStart, type PostgresStartBarrier } from '../../infrastructure/postgres';
import { mapPgError } from '../../infrastructure/postgres/errors';
import { closedPort } from '../../testkit/freezableProxy';
import { countRows, createDatabase, openOn, rejects, type TestDatabase } from '../../testkit/postgresHarness';
import { setUp } from '../conformance/startBarrierConformance';
import { buildOnce, runCli } from '../cli/cliSuite';

// R13.3 on the real server: what a switch shows a client (a read-only server, a dropped
// connection, a closed authority, several hosts where one endpoint is the route) is a typed
// error, the connection that met a read-only server is dropped, an exact replay settles the
// start (settleStart), the optional guard refuses starts with no synchronous standby, and no
// password reaches an error, the CLI's output or an inspection.

const SECRET = 'Pw-S3cret-7c1';
const sqlState = (code: string, message: string): Error => Object.assign(new Error(message), { code });

/** Everything a caller could print of `value`: its message and a deep inspection. */
const printed = (value: unknown): string => `${value instanceof Error ? value.message : ''}\n${inspect(value, { depth: 8, showHidden: true })}`;

describe('PostgreSQL through a switch (R13.3)', function () {
  this.timeout(90_000);
  let db: TestDatabase;
  let main: PostgresStartBarrier;
  const opened: PostgresStartBarrier[] = [];

  before(async () => {
    db = await createDatabase();
    main = await openOn(db, { onError: () => undefined });
  });
  after(async () => {
    for (const a of opened.splice(0)) await a.close();
    await main?.close();
    await db?.drop();
  });
  const open = async (extra: Parameters<typeof openOn>[1] = {}): Promise<PostgresStartBarrier> => {
    const a = await openOn(db, { migrate: false, onError: () => undefined, ...extra });
    opened.push(a);
    return a;
  };
  const withPassword = (): string => {
    const url = new URL(db.url);
    url.password = SECRET; // trust auth: the server ignores it, the library must still hide it
    return url.toString();
  };

  describe('R13.3 no password anywhere', () => {
    it('R13.3 every connection-string form with a password: the open error never shows it (URL, key=value, scheme-less, query, pool config, multi-host)', async () => {
      const port = await closedPort();
      const forms: [string, Parameters<typeof openPostgresStartBarrier>[0], ConnectionError['reason']][] = [
        ['URL', { connectionString: `postgres://app:${SECRET}@127.0.0.1:${port}/db` }, 'refused'],
        ['URL, encoded', { connectionString: `postgres://app:${encodeURIComponent(`${SECRET}/@:`)}@127.0.0.1:${port}/db` }, 'refused'],
        ['query parameter', { connectionString: `postgres://app@127.0.0.1:${port}/db?password=${SECRET}` }, 'refused'],
        ['libpq key=value', { connectionString: `host=127.0.0.1 port=${port} user=app password=${SECRET} dbname=db` }, 'invalid_url'],
        ['libpq key=value, quoted', { connectionString: `host=127.0.0.1 password='${SECRET} x' passfile=/nonexistent/.pgpass` }, 'invalid_url'],
        ['scheme-less', { connectionString: `app:${SECRET}@127.0.0.1:${port}/db` }, 'invalid_url'],
        ['multi-host URI', { connectionString: `postgres://app:${SECRET}@a:5432,b:5432/db` }, 'multi_host'],
        ['multi-host key=value', { connectionString: `host=a,b password=${SECRET}` }, 'multi_host'],
        ['pool config', { poolConfig: { host: '127.0.0.1', port, user: 'app', password: SECRET, database: 'db' } }, 'refused'],
      ];
      for (const [form, options, reason] of forms) {
        const e = await rejects(openPostgresStartBarrier(options));
        expect(e, `${form}: ${String(e)}`).to.be.instanceOf(ConnectionError);
        expect((e as ConnectionError).reason, form).to.equal(reason);
        expect(printed(e), form).not.to.contain(SECRET);
        expect(printed(e), form).not.to.contain(encodeURIComponent(SECRET));
      }
    });

    it('R13.3 util.inspect of an authority opened with a password, of its pool and of its errors shows no password', async () => {
      const a = await openPostgresStartBarrier({ connectionString: withPassword(), migrate: false, poolConfig: { application_name: 'switch-spec' } });
      const b = await openPostgresStartBarrier({ poolConfig: { connectionString: db.url, password: SECRET }, migrate: false });
      const s = await setUp(main);
      await a.barriers.prepare(s.startCommand()); // connections in the pool
      for (const x of [a, b]) {
        expect(printed(x)).not.to.contain(SECRET);
        expect(printed(x.pool)).not.to.contain(SECRET);
        expect(printed(x)).to.contain('PostgresStartBarrier');
      }
      await a.close();
      await b.close();
      const closed = await rejects(a.barriers.prepare(s.startCommand()));
      expect(printed(closed)).not.to.contain(SECRET);
      expect(printed(a)).not.to.contain(SECRET);
    });

    it('R13.3 an SSL setting the driver or the server refuses is a typed ConnectionError (ssl), with no password', async () => {
      const url = new URL(withPassword());
      for (const query of ['sslmode=require', 'sslmode=verify-full&sslrootcert=/nonexistent/root.crt', 'sslmode=verify-ca']) {
        const e = await rejects(openPostgresStartBarrier({ connectionString: `${url.toString()}?${query}`, migrate: false }));
        expect(e, `${query}: ${String(e)}`).to.be.instanceOf(ConnectionError);
        expect((e as ConnectionError).reason, query).to.equal('ssl');
        expect(printed(e)).not.to.contain(SECRET);
      }
    });

    it('R13.3 the CLI never writes a password, whatever form --postgres or QINGLONG_BARRIER_POSTGRES takes', async function () {
      this.timeout(600_000); // the build, then a CLI process per form
      buildOnce();
      const port = await closedPort();
      const forms = [
        `postgres://app:${SECRET}@127.0.0.1:${port}/db`,
        `host=127.0.0.1 port=${port} password=${SECRET}`,
        `app:${SECRET}@127.0.0.1:${port}/db`,
        `postgres://app:${SECRET}@a:5432,b:5432/db`,
        `${withPassword()}?sslmode=require`,
      ];
      for (const form of forms) {
        const i = forms.indexOf(form);
        // each form once through --postgres; migrate (its own client) and the environment on alternate forms
        const runs = [await runCli([i % 2 === 0 ? 'migrate' : 'verify', '--postgres', form]), ...(i < 2 ? [await runCli(['in-doubt'], undefined, { QINGLONG_BARRIER_POSTGRES: form })] : [])];
        for (const r of runs) {
          expect(r.code, `${form}: ${r.stderr}`).not.to.equal(0);
          expect(r.stderr + r.stdout, form).not.to.contain(SECRET);
          expect(r.stderr, form).to.match(/CONNECTION_FAILED|STORE_UNAVAILABLE/);
        }
      }
      // a working store opened with a password: its output holds none either
      const ok = await runCli(['in-doubt', '--postgres', withPassword()]);
      expect(ok.code, ok.stderr).to.equal(0);
      expect(ok.stderr + ok.stdout).not.to.contain(SECRET);
    });
  });

  describe('R13.3 typed through the switch', () => {
    it('R13.3 a multi-host URI or host list is refused naming the supported route (one endpoint: HAProxy or a virtual IP)', async () => {
      for (const options of [
        { connectionString: 'postgres://app@a:5432,b:5432/db' },
        { connectionString: 'host=a,b dbname=db' },
        { poolConfig: { host: 'a,b', database: 'db' } },
      ] as Parameters<typeof openPostgresStartBarrier>[0][]) {
        const e = await rejects(openPostgresStartBarrier(options));
        expect(e, String(e)).to.be.instanceOf(ConnectionError);
        expect((e as ConnectionError).reason).to.equal('multi_host');
        expect(e.message).to.match(/HAProxy/).and.to.match(/virtual IP/);
      }
    });

    it('R13.3 25006 (read-only transactions, as on a standby) is STORE_UNAVAILABLE read_only: nothing written, the connection dropped; settleStart then settles it to created, a second settle to existing', async () => {
      const s = await setUp(main);
      const command: ToolExecutionStartCommand = s.startCommand();
      const before = await countRows(main.pool);
      const setReadOnly = (on: boolean) =>
        db.admin(async (c) => {
          await c.query('SET default_transaction_read_only = off'); // this session's own default came from the database
          await c.query(on ? `ALTER DATABASE ${db.name} SET default_transaction_read_only = on` : `ALTER DATABASE ${db.name} RESET default_transaction_read_only`);
        });
      await setReadOnly(true);
      let restored = false;
      try {
        const a = await open({ poolConfig: { max: 1 } });
        const pid = async () => (await a.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
        const first = await pid();
        const e = await rejects(a.barriers.prepare(command));
        expect(e, String(e)).to.be.instanceOf(StoreUnavailableError);
        expect((e as StoreUnavailableError).reason).to.equal('read_only');
        expect(await pid(), 'the connection that met the read-only server is not reused').not.to.equal(first);
        const lifecycle = await rejects(a.runs.handle({ type: 'CreateRun', data: { runId: `${s.runId}-b`, projectId: 'p', snapshotId: 's', snapshotDigest: `sha256:${'0'.repeat(64)}`, requestedAtMs: 1 } }));
        expect(lifecycle, String(lifecycle)).to.be.instanceOf(StoreUnavailableError);
        expect((lifecycle as StoreUnavailableError).reason).to.equal('read_only');
        expect(await db.admin((c) => countRows(c))).to.deep.equal(before);
        // the primary comes back writable while settleStart replays the command
        const settling = settleStart(a, command, { deadlineMs: 20_000, pauseMs: 20 });
        await new Promise((r) => setTimeout(r, 300));
        await setReadOnly(false);
        restored = true;
        expect((await settling).outcome).to.equal('created');
        expect((await settleStart(a, command)).outcome).to.equal('existing');
      } finally {
        if (!restored) await setReadOnly(false);
      }
    });

    it('R13.3 0A000 (a hot standby refusing SERIALIZABLE) is STORE_UNAVAILABLE read_only and drops the connection', async () => {
      const mapped = mapPgError(sqlState('0A000', 'cannot use serializable mode in a hot standby'));
      expect(mapped).to.be.instanceOf(StoreUnavailableError);
      expect((mapped as StoreUnavailableError).reason).to.equal('read_only');
      const s = await setUp(main);
      const onStartStep: StartStepHook = (step) => {
        if (step === 'lookup') throw sqlState('0A000', 'cannot use serializable mode in a hot standby');
      };
      const a = await open({ poolConfig: { max: 1 }, hooks: { onStartStep } });
      const pid = async () => (await a.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const first = await pid();
      const e = await rejects(a.barriers.prepare(s.startCommand()));
      expect((e as StoreUnavailableError).reason, String(e)).to.equal('read_only');
      expect(await pid()).not.to.equal(first);
    });

    it('R13.3 a connection terminated inside a start (pg_terminate_backend) is STORE_UNAVAILABLE; settleStart replays it to created', async () => {
      const s = await setUp(main);
      const command = s.startCommand();
      let terminated = false;
      const onStartStep: StartStepHook = async (step) => {
        if (step !== 'lock' || terminated) return;
        terminated = true;
        await db.admin((c) => c.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'switch-terminated'`, [db.name]));
      };
      const a = await open({ poolConfig: { application_name: 'switch-terminated' }, hooks: { onStartStep } });
      const e = await rejects(a.barriers.prepare(command));
      expect(e, String(e)).to.be.instanceOf(StoreUnavailableError);
      expect((await settleStart(a, command, { deadlineMs: 10_000 })).outcome).to.equal('created');
      expect(await main.barriers.getByStartId(command.startId)).not.to.equal(null);
    });

    it('R13.3 use after close() is STORE_UNAVAILABLE closed, on the authority and on a pool its caller ended; settleStart does not replay it', async () => {
      const s = await setUp(main);
      const a = await open();
      await a.close();
      for (const e of [await rejects(a.barriers.prepare(s.startCommand())), await rejects(a.runs.readStream(s.runId)), await rejects(settleStart(a, s.startCommand()))]) {
        expect(e, String(e)).to.be.instanceOf(StoreUnavailableError);
        expect((e as StoreUnavailableError).reason).to.equal('closed');
      }
      const pool = new Pool({ connectionString: db.url });
      const b = await openPostgresStartBarrier({ pool, migrate: false });
      opened.push(b);
      await pool.end();
      for (const e of [await rejects(b.barriers.prepare(s.startCommand())), await rejects(b.runs.getStepRun(s.runId, s.stepRunId))]) {
        expect(e, String(e)).to.be.instanceOf(StoreUnavailableError);
        expect((e as StoreUnavailableError).reason).to.equal('closed');
        expect(e.message).not.to.contain('Cannot use a pool after calling end');
      }
    });
  });

  describe('R13.3 optional durability guard', () => {
    for (const writeMode of ['batched', 'stepwise'] as const) {
      it(`R13.3 requireSynchronousStandby (${writeMode}): with no synchronous standby a start is STORE_UNAVAILABLE no_sync_standby and writes nothing; without the option it is created`, async () => {
        const s = await setUp(main);
        const command = s.startCommand();
        const before = await countRows(main.pool);
        const guarded = await open({ requireSynchronousStandby: true, writeMode });
        const e = await rejects(guarded.barriers.prepare(command));
        expect(e, String(e)).to.be.instanceOf(StoreUnavailableError);
        expect((e as StoreUnavailableError).reason).to.equal('no_sync_standby');
        expect(e.message).to.contain('nothing was written');
        expect(await countRows(main.pool)).to.deep.equal(before);
        const plain = await open({ writeMode });
        expect((await plain.barriers.prepare(command)).outcome).to.equal('created');
        // an exact replay is answered from the read, before the guard's write transaction
        expect((await guarded.barriers.prepare(command)).outcome).to.equal('existing');
      });
    }

    it('R13.3 requireSynchronousStandby takes true or false only', async () => {
      const e = await rejects(openOn(db, { migrate: false, requireSynchronousStandby: 'yes' as unknown as boolean }));
      expect(e).to.be.instanceOf(RangeError);
    });
  });
});
