import { expect } from 'chai';
import { ConcurrencyExhaustedError, StoreUnavailableError, type ToolExecutionStartCommand } from '../../domain';
import type { StartStepHook } from '../../application/authority';
import { ConnectionError, DEFAULT_TIMEOUTS, openPostgresStartBarrier, type PostgresStartBarrier } from '../../infrastructure/postgres';
import { closedPort, startFreezableProxy, type FreezableProxy } from '../../testkit/freezableProxy';
import { countRows, createDatabase, openOn, rejects, type TestDatabase } from '../../testkit/postgresHarness';
import { setUp } from '../conformance/startBarrierConformance';
import { buildOnce, runCli } from '../cli/cliSuite';

// R9.5 on the real server: a start makes at most 1 + 3 transaction attempts in total, and a
// server that refuses, drops or stops answering the connection is STORE_UNAVAILABLE within the
// client-side bounds, never a hang and never a raw driver error. The frozen server is the real
// one behind a relay that stops relaying (what a client sees of SIGSTOP or a partition).

/** A driver error as pg raises it: the protocol branches on the SQLSTATE alone. */
const sqlState = (code: string, constraint?: string): Error => Object.assign(new Error(`injected ${code}`), { code, ...(constraint ? { constraint } : {}) });

describe('PostgreSQL bounded retries and waits (R9.5, R5.2)', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let main: PostgresStartBarrier;
  const opened: PostgresStartBarrier[] = [];
  let proxy: FreezableProxy | undefined;

  before(async () => {
    db = await createDatabase();
    main = await openOn(db, { onError: () => undefined }); // the terminate spec ends its idle connections too
  });
  after(async () => {
    for (const a of opened.splice(0)) await a.close();
    await proxy?.close();
    await main?.close();
    await db?.drop();
  });

  const counting = async (failures: (attempt: number) => Error) => {
    let attempts = 0;
    const onStartStep: StartStepHook = (step) => {
      if (step === 'lookup') throw failures(attempts);
    };
    const a = await openOn(db, { migrate: false, hooks: { onStartStep, onAttempt: (n) => void (attempts = n) } });
    opened.push(a);
    return { a, attempts: () => attempts };
  };

  it('R9.5 every attempt fails with 40001: 1 + 3 attempts, then CONCURRENCY_EXHAUSTED, nothing written', async () => {
    const s = await setUp(main);
    const before = await countRows(main.pool);
    const { a, attempts } = await counting(() => sqlState('40001'));
    const e = await rejects(a.barriers.prepare(s.startCommand()));
    expect(e).to.be.instanceOf(ConcurrencyExhaustedError);
    expect((e as ConcurrencyExhaustedError).attempts).to.equal(4);
    expect(attempts()).to.equal(4);
    expect(await countRows(main.pool)).to.deep.equal(before);
  });

  it('R9.5 a unique violation after three 40001 retries gets no fresh budget: still 4 attempts in total (was up to 8)', async () => {
    const s = await setUp(main);
    const { a, attempts } = await counting((n) => (n < 4 ? sqlState('40001') : sqlState('23505', 'stream_position')));
    const e = await rejects(a.barriers.prepare(s.startCommand()));
    expect(e).to.be.instanceOf(ConcurrencyExhaustedError);
    expect(attempts()).to.equal(4);
  });

  it('R9.5 a unique violation on the first attempt is answered in a second transaction on the same budget', async () => {
    const s = await setUp(main);
    const command: ToolExecutionStartCommand = s.startCommand();
    await main.barriers.prepare(command);
    // the racer's own lookup missed the committed start; its insert hits the unique index
    const { a, attempts } = await counting(() => sqlState('23505', 'tool_execution_start_barriers_pkey'));
    const r = await a.barriers.prepare(command);
    expect(r.outcome).to.equal('existing');
    expect(attempts()).to.equal(2);
  });

  it('R9.5 a refused connection: a typed ConnectionError (refused) on open, and CLI exit 7', async () => {
    const url = `postgres://postgres@127.0.0.1:${await closedPort()}/postgres`;
    const e = await rejects(openPostgresStartBarrier({ connectionString: url }));
    expect(e).to.be.instanceOf(ConnectionError);
    expect((e as ConnectionError).reason).to.equal('refused');
    buildOnce();
    const r = await runCli(['verify', '--postgres', url]);
    expect(r.code, r.stderr).to.equal(7);
    expect(r.stderr).to.contain('CONNECTION_FAILED');
  });

  it('R9.5 a frozen server: prepare, reads and recovery of an open authority end in STORE_UNAVAILABLE (query bound); a new open ends in ConnectionError (timeout) at the connect bound, the CLI in exit 7', async () => {
    const s = await setUp(main);
    const command = s.startCommand();
    proxy = await startFreezableProxy('127.0.0.1', Number(new URL(db.url).port || 5432));
    const url = new URL(db.url);
    url.port = String(proxy.port);
    const a = await openPostgresStartBarrier({ connectionString: url.toString(), migrate: false, timeouts: { connectMs: 500, queryMs: 1000 } });
    opened.push(a);
    await a.runs.getStepRun(s.runId, s.stepRunId); // a pooled connection exists before the freeze
    proxy.freeze();
    const frozen = [
      await rejects(a.barriers.prepare(command)),
      await rejects(a.barriers.getByStartId(command.startId)),
      await rejects(a.runs.readStream(s.runId)),
      await rejects(a.recovery.inDoubt()),
    ];
    for (const e of frozen) expect(e, String(e)).to.be.instanceOf(StoreUnavailableError);
    expect(frozen.map((e) => (e as StoreUnavailableError).reason)).to.include.members(['query_timeout']);
    const opening = await rejects(openPostgresStartBarrier({ connectionString: url.toString(), migrate: false, timeouts: { connectMs: 500, queryMs: 1000 } }));
    expect(opening, String(opening)).to.be.instanceOf(ConnectionError);
    expect((opening as ConnectionError).reason).to.equal('timeout');
    // the CLI, with the documented defaults, ends too: exit 7, not pending while the server is frozen
    buildOnce();
    const cli = await runCli(['in-doubt', '--postgres', url.toString()]);
    expect(cli.code, cli.stderr).to.equal(7);
    proxy.thaw();
    // the discarded connections are replaced; whether the frozen prepare committed, a replay tells
    expect(['created', 'existing']).to.include((await a.barriers.prepare(command)).outcome);
  });

  it('R9.5 a connection terminated by the server inside a start is STORE_UNAVAILABLE, and the start rolled back', async () => {
    const s = await setUp(main);
    const before = await countRows(main.pool);
    const onStartStep: StartStepHook = async (step) => {
      if (step !== 'lock') return;
      await db.admin((c) => c.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()'));
    };
    const a = await openOn(db, { migrate: false, writeMode: 'stepwise', hooks: { onStartStep } });
    opened.push(a);
    const e = await rejects(a.barriers.prepare(s.startCommand()));
    expect(e, String(e)).to.be.instanceOf(StoreUnavailableError);
    await main.close(); // its pooled connections were terminated too
    main = await openOn(db, { migrate: false, onError: () => undefined });
    expect(await countRows(main.pool)).to.deep.equal(before);
  });

  it('R9.5 the client-side bounds have documented defaults', () => {
    expect(DEFAULT_TIMEOUTS.connectMs).to.equal(5000);
    expect(DEFAULT_TIMEOUTS.queryMs).to.equal(15_000);
  });
});
