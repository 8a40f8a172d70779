import { nodeArgsOf } from '../../testkit/workerProcess';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { expect } from 'chai';
import {
  ConcurrencyExhaustedError,
  PreconditionError,
  SemanticConflictError,
  TransactionTimeoutError,
  isStartBarrierError,
  type StepRunState,
  type ToolExecutionStartCommand,
} from '../../domain';
import { buildScenario, type Scenario } from '../../domain/scenario';
import type { StartStepHook } from '../../application/authority';
import type { PrepareResult } from '../../domain/records';
import type { PostgresStartBarrier } from '../../infrastructure/postgres';
import { countOf, countRows, rejects, waitForLockWaiters } from '../../testkit/postgresHarness';
import { holdingAdvisoryLocks, sharedStore, withStranger } from './sharedStore';

// Races with real connections (R5.2, R4): every racer is its own pool (its own connection to
// the server), or its own OS process. The server decides; the specs check that exactly one
// start wins and every loser gets `existing` or a typed error, never a partial write.

const RACERS = 8;

describe('PostgreSQL races (R5.2, R4.2, R4.3)', function () {
  this.timeout(60_000);
  const store = sharedStore();
  const { clients, ready: setUp, stepRunsOfOneRun } = store;

  const settle = (ps: Promise<PrepareResult>[]) =>
    Promise.all(ps.map((p) => p.then((r) => ({ ok: r }), (e: unknown) => ({ error: e as Error }))));

  /** The most write transactions (BEGINs) any one operation of these racers spent. */
  let most = 0;
  const counted = { hooks: { onAttempt: (n: number) => void (most = Math.max(most, n)) } };

  it('R4.2, R13.1 eight clients on separate connections, same command: exactly one created, seven existing (the losers read the answer, no write transaction spent on it), one barrier, at most 1 + 3 write transactions each', async () => {
    const s = await setUp();
    const command = s.startCommand();
    const racers = await clients(RACERS, counted);
    most = 0;
    const before = await countRows(store.main.pool);
    const results = await settle(racers.map((a) => a.barriers.prepare(command)));
    const outcomes = results.map((r) => ('ok' in r ? r.ok.outcome : r.error.message));
    expect(outcomes.filter((o) => o === 'created'), outcomes.join(', ')).to.have.length(1);
    expect(outcomes.filter((o) => o === 'existing'), outcomes.join(', ')).to.have.length(RACERS - 1);
    expect(most).to.be.within(1, 4);
    const barriers = results.map((r) => ('ok' in r ? r.ok.barrier : null));
    for (const b of barriers) expect(b).to.deep.equal(barriers[0]);
    const after = await countRows(store.main.pool);
    expect(countOf(after, 'tool_execution_start_barriers') - countOf(before, 'tool_execution_start_barriers')).to.equal(1);
    expect(countOf(after, 'events') - countOf(before, 'events')).to.equal(5);
    expect((await store.main.runs.getStepRun(s.runId, s.stepRunId))?.status).to.equal('running');
  });

  it('R4.3, R13.1 eight clients, eight different commands on one StepRun: one created, seven typed conflicts or precondition errors, at most 1 + 3 write transactions each', async () => {
    const s = await setUp();
    const racers = await clients(RACERS, counted);
    most = 0;
    const before = await countRows(store.main.pool);
    const commands = racers.map((_, i) => s.startCommand(s.stepRun, `racer${i}`));
    const results = await settle(racers.map((a, i) => a.barriers.prepare(commands[i]!)));
    const created = results.filter((r) => 'ok' in r && r.ok.outcome === 'created');
    expect(created).to.have.length(1);
    for (const r of results) {
      if ('ok' in r) continue;
      expect(r.error instanceof SemanticConflictError || r.error instanceof PreconditionError, r.error.message).to.equal(true);
    }
    expect(most).to.be.within(1, 4);
    const after = await countRows(store.main.pool);
    expect(countOf(after, 'tool_execution_start_barriers') - countOf(before, 'tool_execution_start_barriers')).to.equal(1);
    expect(countOf(after, 'security_audit_events') - countOf(before, 'security_audit_events')).to.equal(1);
    expect(countOf(after, 'step_run_mutations') - countOf(before, 'step_run_mutations')).to.equal(1);
  });

  it('R3.5 R13.1 eight clients start eight different StepRuns of one Run: each created or CONCURRENCY_EXHAUSTED having written nothing (lost turns count), re-called until created, all chained on the Run version', async () => {
    const s = await setUp();
    const steps: StepRunState[] = [s.stepRun];
    for (let i = 1; i < RACERS; i++) {
      const stepRunId = `${s.stepRunId}-${i}`;
      await store.main.runs.handle({ type: 'CreateStepRun', data: { runId: s.runId, stepRunId, kind: 'tool', toolDefinition: s.stepRun.toolDefinition!, requestedAtMs: 1 } });
      await store.main.runs.handle({ type: 'MarkStepRunReady', data: { runId: s.runId, stepRunId, requestedAtMs: 1 } });
      steps.push((await store.main.runs.getStepRun(s.runId, stepRunId))!);
    }
    const versionBefore = (await store.main.runs.readStream(s.runId)).length;
    const racers = await clients(RACERS);
    const commands: ToolExecutionStartCommand[] = steps.map((step, i) => {
      const c = s.startCommand(step, `step${i}`);
      return { ...c, stepRun: { ...c.stepRun, stepRunId: step.stepRunId } };
    });
    // R13.1: at most 1 + 3 write transactions per start, a lost turn of the Run included, so a
    // writer that keeps losing the turn ends typed, having written nothing, and is called again
    const startUntilCreated = async (a: PostgresStartBarrier, command: ToolExecutionStartCommand): Promise<PrepareResult> => {
      for (;;) {
        try {
          return await a.barriers.prepare(command);
        } catch (e) {
          expect(e, (e as Error).message).to.be.instanceOf(ConcurrencyExhaustedError);
          expect(await store.main.barriers.getByStartId(command.startId)).to.equal(null);
        }
      }
    };
    const results = await settle(racers.map((a, i) => startUntilCreated(a, commands[i]!)));
    const failures = results.flatMap((r) => ('error' in r ? [r.error] : []));
    expect(failures, failures.map((e) => e.message).join('; ')).to.have.length(0);
    const sequences = results.map((r) => ('ok' in r ? r.ok.barrier.record.runEvent.runEventSequence : 0)).sort((a, b) => a - b);
    expect(sequences).to.deep.equal(Array.from({ length: RACERS }, (_, i) => versionBefore + 5 * i + 4));
    expect((await store.main.runs.readStream(s.runId)).length).to.equal(versionBefore + 5 * RACERS);
    for (const step of steps) expect((await store.main.runs.getStepRun(s.runId, step.stepRunId))?.status).to.equal('running');
    // every retry turn ended with its attempt: no advisory lock is left, no session setting leaked
    const locks = await store.main.pool.query(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`);
    expect(locks.rows[0]).to.deep.equal({ n: 0 });
    for (const a of racers) {
      const c = await a.pool.connect();
      try {
        expect((await c.query(`SELECT setting AS l FROM pg_settings WHERE name = 'lock_timeout'`)).rows[0]).to.deep.equal({ l: String(a.timeouts.lockMs) });
      } finally {
        c.release();
      }
    }
  });

  it('R2.1, R13.1 eight clients create the same Run at once: one succeeds, seven get the typed run_exists precondition (decided on a read after the lost race), at most 1 + 3 write transactions each', async () => {
    const s = buildScenario();
    const racers = await clients(RACERS, counted);
    most = 0;
    const results = await Promise.all(
      racers.map((a) => a.runs.handle(s.lifecycle[0]!).then((r) => ({ ok: r }), (e: unknown) => ({ error: e as Error }))),
    );
    expect(results.filter((r) => 'ok' in r)).to.have.length(1);
    for (const r of results) {
      if ('ok' in r) continue;
      expect(r.error, r.error.message).to.be.instanceOf(PreconditionError);
      expect((r.error as PreconditionError).reason).to.equal('run_exists');
    }
    expect(most).to.be.within(1, 4);
    expect(await store.main.runs.readStream(s.runId)).to.have.length(1);
  });

  it('R4.2 eight separate OS processes, same command: exactly one created, seven existing', async function () {
    // Eight Node processes (compiled under npm test, through tsx alone): minutes on a loaded 2-core machine.
    this.timeout(240_000);
    const s = await setUp();
    const command = s.startCommand();
    const worker = join(__dirname, 'raceWorker.ts');
    const procs: ChildProcessWithoutNullStreams[] = Array.from({ length: RACERS }, () =>
      spawn(process.execPath, [...nodeArgsOf(worker), store.db.url, JSON.stringify(command)], { stdio: ['pipe', 'pipe', 'pipe'] }),
    );
    const stderr: string[] = [];
    const outputs = procs.map((p) => {
      p.stderr.on('data', (d: Buffer) => stderr.push(d.toString()));
      const lines = createInterface({ input: p.stdout });
      const messages: Record<string, unknown>[] = [];
      const ready = new Promise<void>((resolve) => {
        lines.on('line', (line) => {
          const m = JSON.parse(line) as Record<string, unknown>;
          messages.push(m);
          if (m.ready === true) resolve();
        });
      });
      const exited = new Promise<number | null>((resolve) => p.on('exit', (code) => resolve(code)));
      return { ready, exited, messages };
    });
    await Promise.race([Promise.all(outputs.map((o) => o.ready)), Promise.all(outputs.map((o) => o.exited)).then(() => Promise.reject(new Error(stderr.join(''))))]);
    for (const p of procs) p.stdin.write('go\n');
    const codes = await Promise.all(outputs.map((o) => o.exited));
    expect(codes, stderr.join('')).to.deep.equal(Array(RACERS).fill(0));
    const results = outputs.map((o) => o.messages.find((m) => 'outcome' in m || 'error' in m));
    const pids = new Set(results.map((r) => r?.pid));
    expect(pids.size).to.equal(RACERS);
    expect(results.filter((r) => r?.outcome === 'created'), JSON.stringify(results)).to.have.length(1);
    expect(results.filter((r) => r?.outcome === 'existing'), JSON.stringify(results)).to.have.length(RACERS - 1);
    expect((await store.main.barriers.getByStartId(command.startId))?.record.startId).to.equal(command.startId);
  });

  it('R5.2 a Run row locked by another session: the start fails with TRANSACTION_TIMEOUT within lock_timeout and writes nothing', async () => {
    const s = await setUp();
    const command = s.startCommand();
    const lockMs = 300;
    const [racer] = await clients(1, { timeouts: { lockMs } });
    const before = await countRows(store.main.pool);
    await store.db.admin(async (holder) => {
      await holder.query('BEGIN');
      await holder.query('SELECT * FROM ql3.runs WHERE run_id = $1 FOR UPDATE', [s.runId]);
      try {
        const t0 = Date.now();
        const error = await rejects(racer!.barriers.prepare(command));
        const elapsed = Date.now() - t0;
        expect(error, error.message).to.be.instanceOf(TransactionTimeoutError);
        expect((error as TransactionTimeoutError).timeout).to.equal('lock');
        expect(elapsed).to.be.within(lockMs - 20, lockMs + 1000);
        expect(isStartBarrierError(error)).to.equal(true);
      } finally {
        await holder.query('ROLLBACK');
      }
    });
    expect(await countRows(store.main.pool)).to.deep.equal(before);
    expect((await store.main.runs.getStepRun(s.runId, s.stepRunId))?.status).to.equal('ready');
    expect((await racer!.barriers.prepare(command)).outcome).to.equal('created');
  });

  it('R9.5 a login with only CONNECT holding advisory locks (the old turn and gate keys among them) stalls neither prepare nor lifecycle commands', async () => {
    const s = await setUp();
    const locks = [
      'SELECT pg_advisory_lock(7174, 0)',
      'SELECT pg_advisory_lock(7173, 0)',
      'SELECT pg_advisory_lock(7173, hashtext($1))',
      'SELECT pg_advisory_lock(hashtext($1))',
      'SELECT pg_advisory_lock(7173100158)',
    ];
    await withStranger(store.db, 'ql3_spec_stranger', (stranger) =>
      holdingAdvisoryLocks(store.db, stranger, s.runId, locks, async () => {
        // a short lock_timeout: a wait on any of those keys would fail the call with TRANSACTION_TIMEOUT
        const [racer] = await clients(1, { timeouts: { lockMs: 200 } });
        expect((await racer!.barriers.prepare(s.startCommand())).outcome).to.equal('created');
        await racer!.runs.handle({ type: 'CompleteStepRun', data: { runId: s.runId, stepRunId: s.stepRunId, decidedBy: 'spec', reason: 'tool_succeeded', requestedAtMs: 2 } });
        const other = buildScenario();
        for (const c of other.lifecycle) await racer!.runs.handle(c);
        expect((await racer!.barriers.prepare(other.startCommand())).outcome).to.equal('created');
      }),
    );
  });

  it('R5.2 a statement that outlives statement_timeout fails with TRANSACTION_TIMEOUT (statement) and writes nothing', async () => {
    const s = await setUp();
    const command = s.startCommand();
    // Long enough for the open's own catalog checks on a loaded machine; the lock wait still outlives it.
    const [racer] = await clients(1, { timeouts: { statementMs: 3_000, lockMs: 60_000 } });
    const before = await countRows(store.main.pool);
    await store.db.admin(async (holder) => {
      await holder.query('BEGIN');
      await holder.query('SELECT * FROM ql3.step_runs WHERE run_id = $1 FOR UPDATE', [s.runId]);
      try {
        const error = await rejects(racer!.barriers.prepare(command));
        expect(error, error.message).to.be.instanceOf(TransactionTimeoutError);
        expect((error as TransactionTimeoutError).timeout).to.equal('statement');
      } finally {
        await holder.query('ROLLBACK');
      }
    });
    expect(await countRows(store.main.pool)).to.deep.equal(before);
  });

  it('R5.2 a client stalled inside the transaction loses it to idle_in_transaction_session_timeout: typed timeout, nothing written', async () => {
    const s = await setUp();
    const command = s.startCommand();
    const stall: StartStepHook = async (step) => {
      if (step === 'evidence') await new Promise((r) => setTimeout(r, 600));
    };
    const [racer] = await clients(1, { timeouts: { idleInTransactionMs: 200 }, writeMode: 'stepwise', hooks: { onStartStep: stall } });
    const before = await countRows(store.main.pool);
    const error = await rejects(racer!.barriers.prepare(command));
    expect(error, error.message).to.be.instanceOf(TransactionTimeoutError);
    expect((error as TransactionTimeoutError).timeout).to.equal('idle_in_transaction');
    expect(await countRows(store.main.pool)).to.deep.equal(before);
    expect((await store.main.runs.getStepRun(s.runId, s.stepRunId))?.status).to.equal('ready');
  });

  it('R4.3 two Runs racing on one startId: the loser waits on the unique index, then gets a typed conflict naming startId', async () => {
    // The Run locks do not serialise two Runs, so the second racer meets the first one's
    // uncommitted rows in a unique index and waits. When the first commits, SSI reports the
    // clash as 40001 (the loser had read that index range in its lookup); the retry's lookup
    // then names startId. A plain 23505 takes the fresh-lookup path (next spec): same outcome.
    const a = await setUp();
    const b = await setUp();
    const first = a.startCommand();
    const second = { ...b.startCommand(), startId: first.startId };
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const holdBeforeCommit: StartStepHook = (step) => (step === 'beforeCommit' ? gate : undefined);
    const [holder] = await clients(1, { hooks: { onStartStep: holdBeforeCommit } });
    const [racer] = await clients(1);
    const held = holder!.barriers.prepare(first);
    await new Promise((r) => setTimeout(r, 100)); // the holder is parked before COMMIT
    const racing = racer!.barriers.prepare(second);
    await waitForLockWaiters(store.db, 1);
    release();
    expect((await held).outcome).to.equal('created');
    const error = await rejects(racing);
    expect(error, error.message).to.be.instanceOf(SemanticConflictError);
    expect((error as SemanticConflictError).identity).to.equal('startId');
    expect(await store.main.barriers.getByStepRunAttempt(b.runId, b.stepRunId, 3)).to.equal(null);
    expect((await store.main.runs.getStepRun(b.runId, b.stepRunId))?.status).to.equal('ready');
  });

  it('R4.3 a 23505 from a unique index is resolved by a fresh lookup into a typed conflict, never a raw pg error', async () => {
    // A RunEvent id that is already the id of a lifecycle event of another Run: the replay lookup
    // reads RunEvents (StepRunStarted) only, so only the log's own unique event id can refuse the
    // start, with a plain 23505.
    const s = await setUp();
    await store.main.barriers.prepare(s.startCommand());
    const [taken] = await store.db.admin(async (c) => (await c.query<{ event_id: string }>("SELECT event_id FROM ql3.events WHERE stream_id = $1 AND event_type = 'StepRunCreated'", [`run-${s.runId}`])).rows);
    const other = await setUp();
    const fresh = other.startCommand();
    const reuse = { ...fresh, mutation: { ...fresh.mutation, runEventId: taken!.event_id } };
    const before = await countRows(store.main.pool);
    const error = await rejects(store.main.barriers.prepare(reuse));
    expect(error, error.message).to.be.instanceOf(SemanticConflictError);
    expect((error as SemanticConflictError).identity).to.equal('runEventId');
    expect(error.message).to.contain('already used by another record');
    expect(await countRows(store.main.pool)).to.deep.equal(before);
  });

  it('R5.2 with retries exhausted the loser gets CONCURRENCY_EXHAUSTED and nothing of its start survives', async () => {
    const s = await setUp();
    const command = s.startCommand();
    // After the loser's snapshot (it has the Run's turn: 'lock'), another session commits a new
    // version of the stream head: the event trigger's move of that head then fails with 40001,
    // and with no retry left that is final.
    const loser = await store.loserOfAMovedHead(s.runId);
    const error = await rejects(loser.barriers.prepare(command));
    expect(error, error.message).to.be.instanceOf(ConcurrencyExhaustedError);
    expect((error as ConcurrencyExhaustedError).attempts).to.equal(1);
    expect((error as ConcurrencyExhaustedError).lastCause).to.match(/^40001/);
    expect((await store.main.runs.getStepRun(s.runId, s.stepRunId))?.status).to.equal('ready');
    expect(await store.main.barriers.getByStartId(command.startId)).to.equal(null);
    // and with retries (the default) the same start then simply succeeds
    expect((await store.main.barriers.prepare(command)).outcome).to.equal('created');
  });

  it('R5.2 R13.1 writers of one Run take turns: 8 clients, 4 starts each of different StepRuns of one Run; a start that ran out of its 1 + 3 write transactions wrote nothing and its re-call commits', async () => {
    const s = await setUp();
    const perClient = 4;
    const ids = Array.from({ length: 8 * perClient }, (_, i) => `${s.stepRunId}-t${i}`);
    for (const id of ids) {
      await store.main.runs.handle({ type: 'CreateStepRun', data: { runId: s.runId, stepRunId: id, kind: 'tool', toolDefinition: s.stepRun.toolDefinition!, requestedAtMs: 1 } });
      await store.main.runs.handle({ type: 'MarkStepRunReady', data: { runId: s.runId, stepRunId: id, requestedAtMs: 1 } });
    }
    const racers = await clients(8);
    const commands = await Promise.all(
      ids.map(async (id, i) => {
        const step = (await store.main.runs.getStepRun(s.runId, id))!;
        const raw = s.startCommand(step, `t${i}`);
        return { ...raw, stepRun: { ...raw.stepRun, stepRunId: id } };
      }),
    );
    const results = await Promise.all(
      racers.map(async (racer, c) => {
        const outcomes: string[] = [];
        for (let i = 0; i < perClient; i++) {
          const command = commands[c * perClient + i]!;
          for (;;) {
            try {
              outcomes.push((await racer.barriers.prepare(command)).outcome);
              break;
            } catch (e) {
              if (!(e instanceof ConcurrencyExhaustedError)) throw e;
              expect(await store.main.barriers.getByStartId(command.startId), 'an exhausted start wrote nothing').to.equal(null);
            }
          }
        }
        return outcomes;
      }),
    );
    expect(results.flat()).to.deep.equal(Array(8 * perClient).fill('created'));
    expect(await store.main.runs.readStream(s.runId)).to.have.length(3 + ids.length * (2 + 5)); // the scenario's 3, then 2 lifecycle and 5 start events per StepRun
    expect(await queueLocks(), 'no session lock of the former Run queue').to.deep.equal({ held: 0, waiting: 0 });
  });

  /** The former Run queue's locks (advisory class 7433267, a session lock R13.1 removed) in this database: held and waiting. */
  const queueLocks = (): Promise<{ held: number; waiting: number }> =>
    store.db.admin(async (c) => {
      const { rows } = await c.query<{ held: number; waiting: number }>(`SELECT count(*) FILTER (WHERE granted)::int AS held, count(*) FILTER (WHERE NOT granted)::int AS waiting
        FROM pg_locks WHERE locktype = 'advisory' AND classid = 7433267 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`);
      return rows[0]!;
    });

  it("R5.2 R13.1 writers that lost a Run's turn (two starts, a lifecycle command) wait for it outside any transaction, holding no session lock; released, all commit within 1 + 3 write transactions", async () => {
    const s = await setUp();
    const commands = await stepRunsOfOneRun(s, 2, 'q');
    const racers = await clients(3, { timeouts: { lockMs: 10_000 } });
    let pending: Promise<unknown>[] = [];
    await store.db.admin(async (holder) => {
      await holder.query('BEGIN');
      await holder.query('SELECT * FROM ql3.runs WHERE run_id = $1 FOR UPDATE', [s.runId]);
      try {
        pending = [
          racers[0]!.barriers.prepare(commands[0]!).then((r) => r.outcome),
          racers[1]!.barriers.prepare(commands[1]!).then((r) => r.outcome),
          racers[2]!.runs
            .handle({ type: 'CreateStepRun', data: { runId: s.runId, stepRunId: `${s.stepRunId}-q-new`, kind: 'tool', toolDefinition: s.stepRun.toolDefinition!, requestedAtMs: 1 } })
            .then(() => 'appended'),
        ];
        // all three wait for the Run head's row lock (a tuple lock: ended with each waiter's statement)
        const deadline = Date.now() + 10_000;
        for (let waiting = 0; waiting < 3; ) {
          if (Date.now() > deadline) throw new Error(`expected three writers waiting for the turn, saw ${waiting}`);
          await new Promise((r) => setTimeout(r, 20));
          waiting = await store.db.admin(async (c) => (await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%await_run_turn%'`)).rows[0]!.n);
          expect(await queueLocks()).to.deep.equal({ held: 0, waiting: 0 });
        }
      } finally {
        await holder.query('ROLLBACK');
      }
    });
    expect(await Promise.all(pending)).to.deep.equal(['created', 'created', 'appended']);
    expect(await queueLocks()).to.deep.equal({ held: 0, waiting: 0 });
    for (const c of commands) expect((await store.main.barriers.getByStartId(c.startId))?.record.startId).to.equal(c.startId);
    expect(await store.main.runs.readStream(s.runId)).to.have.length(3 + 2 * (2 + 5) + 1);
  });

  it("R5.2 R13.1 a session holding the former Run queue key for its own reasons neither delays nor fails a writer that lost the turn", async () => {
    const s = await setUp();
    const [command] = await stepRunsOfOneRun(s, 1, 'k');
    const lockMs = 300;
    const [racer] = await clients(1, { timeouts: { lockMs } });
    await store.db.admin(async (stranger) => {
      await stranger.query('SELECT pg_advisory_lock(7433267, hashtext($1))', [s.runId]);
      try {
        await store.db.admin(async (holder) => {
          await holder.query('BEGIN');
          await holder.query('SELECT * FROM ql3.runs WHERE run_id = $1 FOR UPDATE', [s.runId]);
          const pending = racer!.barriers.prepare(command!);
          await new Promise((r) => setTimeout(r, lockMs / 2));
          await holder.query('ROLLBACK');
          expect((await pending).outcome).to.equal('created');
        });
      } finally {
        await stranger.query('SELECT pg_advisory_unlock_all()');
      }
    });
  });

  it('R3.5 R9.5 R13.1 a writer of the Run commits between a start\'s read and its write: the turn\'s compare-and-set refuses the stale decision before any write, and the start decides again on a fresh read, the refused write transaction counted', async () => {
    const s = await setUp();
    let interfered = 0;
    let attempts = 0;
    const [racer] = await clients(1, {
      hooks: {
        onAttempt: (n) => void (attempts = n),
        onStartStep: async (step) => {
          if (step !== 'lookup' || interfered++ > 0) return;
          // same Run, another StepRun: the Run version moves, this start's StepRun does not
          await store.main.runs.handle({ type: 'CreateStepRun', data: { runId: s.runId, stepRunId: `${s.stepRunId}-other`, kind: 'tool', toolDefinition: s.stepRun.toolDefinition!, requestedAtMs: 1 } });
        },
      },
    });
    const versionBefore = (await store.main.runs.readStream(s.runId)).length;
    const result = await racer!.barriers.prepare(s.startCommand());
    expect(result.outcome).to.equal('created');
    expect(interfered).to.equal(2); // decided twice
    expect(attempts).to.equal(2); // every BEGIN counts (R13.1): the refused write, then the one that committed
    const events = await store.main.runs.readStream(s.runId);
    expect(events).to.have.length(versionBefore + 1 + 5);
    expect(events.slice(-5).map((e) => e.streamPosition)).to.deep.equal([versionBefore + 2, versionBefore + 3, versionBefore + 4, versionBefore + 5, versionBefore + 6]);
  });

  it('R5.2 R9.5 a fresh deployment: 8 clients starting on distinct Runs over empty tables: each start commits or ends typed (CONCURRENCY_EXHAUSTED) having written nothing, and its re-call commits', async () => {
    // SSI locks B-tree pages: on tiny tables every lookup and insert share one leaf page, so
    // starts of different Runs can fail each other. Their attempts are not serialised (R9.5):
    // retries pause at random, and the last one runs alone (startGate.int.spec.ts);
    // a start that still ends in a failure is whole-or-nothing like any other.
    const racers = await clients(8);
    const scenarios = racers.map(() => Array.from({ length: 15 }, () => buildScenario()));
    for (const list of scenarios) for (const sc of list) for (const c of sc.lifecycle) await store.main.runs.handle(c);
    const outcomes = await Promise.all(
      racers.map(async (racer, i) => {
        const results: { sc: Scenario; outcome: string | Error }[] = [];
        for (const sc of scenarios[i]!) results.push({ sc, outcome: await racer.barriers.prepare(sc.startCommand()).then((r) => r.outcome, (e: Error) => e) });
        return results;
      }),
    );
    for (const { sc, outcome } of outcomes.flat()) {
      if (outcome === 'created') continue;
      expect(outcome, String(outcome)).to.be.instanceOf(ConcurrencyExhaustedError);
      expect(await store.main.barriers.getByStartId(sc.startCommand().startId)).to.equal(null);
      expect((await store.main.runs.getStepRun(sc.runId, sc.stepRunId))?.status).to.equal('ready');
      expect((await store.main.barriers.prepare(sc.startCommand())).outcome).to.equal('created');
    }
    for (const { sc } of outcomes.flat()) expect((await store.main.runs.getStepRun(sc.runId, sc.stepRunId))?.status).to.equal('running');
  });
});
