import { expect } from 'chai';
import { ConcurrencyExhaustedError, TransactionTimeoutError } from '../../domain';
import { rejects } from '../../testkit/rejects';
import { buildScenario } from '../../domain/scenario';
import type { PostgresStartBarrier } from '../../infrastructure/postgres';
import { sharedStore, withStranger } from './sharedStore';

// R9.5, R5.2: starts of different Runs still meet on shared B-tree pages under
// SERIALIZABLE (SSI locks the index pages their probes read), most on a young store. A start's
// last attempt therefore runs alone: it takes the start gate exclusively (queued for at most
// lock_timeout) before its snapshot, and so meets no concurrent writer. No start of an
// unrelated Run runs out of retries that way, and a session holding the gate (as pg_dump holds every table) delays the last attempt (and the
// writers queued behind its request) by a bound, and never makes a start fail.

describe('PostgreSQL: the last attempt runs alone (R9.5, R5.2)', function () {
  this.timeout(120_000);
  const store = sharedStore();
  const { clients, readyRuns } = store;

  it('R9.5 R5.2 given 8 clients on a fresh store, when they make 320 starts of distinct Runs, then every one is created: none runs out of retries', async () => {
    const racers = await clients(8);
    const perClient = 40;
    const scenarios = await readyRuns(racers.length * perClient);
    const outcomes = await Promise.all(
      racers.map(async (racer, c) => {
        const results: string[] = [];
        for (let i = 0; i < perClient; i++) {
          results.push(await racer.barriers.prepare(scenarios[c * perClient + i]!.startCommand()).then((r) => r.outcome, (e: Error) => `${e.name}: ${e.message}`));
        }
        return results;
      }),
    );
    expect(outcomes.flat().filter((o) => o !== 'created')).to.deep.equal([]);
    for (const sc of scenarios) expect((await store.main.runs.getStepRun(sc.runId, sc.stepRunId))?.status).to.equal('running');
  });

  it('R9.5 given no retries at all (every attempt is the last), when 8 clients start distinct Runs together, then each attempt runs alone and every start is created', async () => {
    const racers = await clients(8, { maxRetries: 0 });
    const scenarios = await readyRuns(racers.length * 5);
    const outcomes = await Promise.all(
      racers.map(async (racer, c) => {
        const results: string[] = [];
        for (let i = 0; i < 5; i++) results.push(await racer.barriers.prepare(scenarios[c * 5 + i]!.startCommand()).then((r) => r.outcome, (e: Error) => `${e.name}: ${e.message}`));
        return results;
      }),
    );
    expect(outcomes.flat().filter((o) => o !== 'created')).to.deep.equal([]);
  });

  // What the gate is for: the attempt's SERIALIZABLE snapshot must follow it, or the writers that
  // commit while it waits are concurrent with it, and SSI fails it on what both read and wrote
  //. With index scans off every statement reads whole tables, so a writer that
  // commits during the wait always forms that structure with an attempt whose snapshot came first.
  const whileAWriterHoldsTheGate = async (act: (last: PostgresStartBarrier) => Promise<string>): Promise<string> => {
    const [w] = await readyRuns(1);
    const scans = (set: boolean) =>
      store.db.admin(async (c) => {
        for (const knob of ['enable_indexscan', 'enable_indexonlyscan', 'enable_bitmapscan']) await c.query(`ALTER DATABASE ${c.escapeIdentifier(store.db.name)} ${set ? `SET ${knob} = off` : `RESET ${knob}`}`);
      });
    await scans(true);
    try {
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let atCommit!: () => void;
      const reached = new Promise<void>((r) => (atCommit = r));
      const [writer] = await clients(1, { hooks: { onStartStep: async (step) => { if (step === 'beforeCommit') { atCommit(); await held; } } } });
      const [last] = await clients(1, { maxRetries: 0 });
      const written = writer!.barriers.prepare(w!.startCommand());
      await reached; // the writer holds the gate in share mode, its transaction open
      const done = act(last!).catch((e: Error) => `${e.name}: ${e.message}`);
      let queued = false;
      for (let i = 0; i < 1000 && !queued; i++) {
        queued = await store.db.admin(async (c) => (await c.query(`SELECT 1 FROM pg_locks WHERE relation = 'ql3.start_gate'::regclass AND NOT granted`)).rowCount === 1);
        if (!queued) await new Promise((r) => setTimeout(r, 5));
      }
      release();
      expect((await written).outcome).to.equal('created');
      expect(queued, 'the last attempt queued for the gate').to.equal(true);
      return await done;
    } finally {
      await scans(false);
    }
  };

  it('R9.5 given a writer holding the start gate, when a start\'s last attempt waits for it and the writer commits, then the attempt\'s snapshot follows the gate and the start is created', async () => {
    const [s] = await readyRuns(1);
    expect(await whileAWriterHoldsTheGate(async (last) => (await last.barriers.prepare(s!.startCommand())).outcome)).to.equal('created');
  });

  it('R9.5 given a writer holding the start gate, when a lifecycle command\'s last attempt waits for it (a Run created, its StepRun made ready) and the writer commits, then the attempt\'s snapshot follows the gate and it commits', async () => {
    const s = buildScenario();
    const outcome = await whileAWriterHoldsTheGate(async (last) => {
      for (const c of s.lifecycle) await last.runs.handle(c);
      return (await store.main.runs.getStepRun(s.runId, s.stepRunId))?.status ?? 'missing';
    });
    expect(outcome).to.equal('ready');
  });

  it('R9.5 given another session holding the start gate in share mode (as pg_dump does), when starts and lifecycle commands run with every attempt the last, then they still commit: the gate delays the last attempt by lock_timeout (queued for it) and fails nothing', async () => {
    const [racer] = await clients(1, { maxRetries: 0, timeouts: { lockMs: 200 } });
    const [s, other] = await readyRuns(2);
    await store.db.admin(async (holder) => {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE ql3.start_gate IN ACCESS SHARE MODE');
      try {
        expect((await racer!.barriers.prepare(s!.startCommand())).outcome).to.equal('created');
        await racer!.runs.handle({ type: 'CompleteStepRun', data: { runId: s!.runId, stepRunId: s!.stepRunId, decidedBy: 'spec', reason: 'tool_succeeded', requestedAtMs: 2 } });
        expect((await store.main.barriers.prepare(other!.startCommand())).outcome).to.equal('created');
      } finally {
        await holder.query('ROLLBACK');
      }
    });
  });

  // Writers that lost the turn wait for it outside any transaction (ql3.await_run_turn), taking
  // the Run head's row lock for the length of one statement. A last attempt holding the gate
  // alone must not lose its turn to one of them: it waits that moment out.
  it('R9.5 R13.1 given the Run head row held for a moment (as a waiting writer\'s await_run_turn holds it), when a start\'s and a lifecycle command\'s last attempts take the turn, then they wait for it and commit, not CONCURRENCY_EXHAUSTED', async () => {
    const [last] = await clients(1, { maxRetries: 0, timeouts: { lockMs: 5_000 } });
    const [s] = await readyRuns(1);
    const whileTheRowIsHeld = async (act: () => Promise<string>): Promise<string> =>
      store.db.admin(async (holder) => {
        await holder.query('BEGIN');
        await holder.query('SELECT 1 FROM ql3.runs WHERE run_id = $1 FOR UPDATE', [s!.runId]);
        let done: Promise<string> | undefined;
        try {
          done = act().catch((e: Error) => `${e.name}: ${e.message}`);
          let waiting = false;
          for (let i = 0; i < 1000 && !waiting; i++) {
            waiting = await store.db.admin(async (c) => (await c.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%take_%_turn%'`)).rowCount === 1);
            if (!waiting) await new Promise((r) => setTimeout(r, 5));
          }
          expect(waiting, 'the last attempt waits for the row').to.equal(true);
        } finally {
          await holder.query('ROLLBACK');
        }
        return done;
      });
    expect(await whileTheRowIsHeld(async () => (await last!.barriers.prepare(s!.startCommand())).outcome)).to.equal('created');
    const stepRunId = `${s!.stepRunId}-next`;
    const created = await whileTheRowIsHeld(async () => {
      await last!.runs.handle({ type: 'CreateStepRun', data: { runId: s!.runId, stepRunId, kind: 'tool', toolDefinition: s!.stepRun.toolDefinition!, requestedAtMs: 1 } });
      return (await store.main.runs.getStepRun(s!.runId, stepRunId))?.status ?? 'missing';
    });
    expect(created).to.equal('created');
  });

  it('R13.1 given the Run head row held past the deadline, when a last attempt waits for it, then it ends typed within the deadline, not lock_timeout, having written nothing', async () => {
    const [last] = await clients(1, { maxRetries: 0, timeouts: { lockMs: 60_000, statementMs: 60_000, deadlineMs: 300 } });
    const [s] = await readyRuns(1);
    const command = s!.startCommand();
    await store.db.admin(async (holder) => {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM ql3.runs WHERE run_id = $1 FOR UPDATE', [s!.runId]);
      try {
        const startedAt = Date.now();
        const e = await rejects(last!.barriers.prepare(command));
        expect(e instanceof ConcurrencyExhaustedError || e instanceof TransactionTimeoutError, String(e)).to.equal(true);
        expect(Date.now() - startedAt, 'ended by the deadline, not the 60 s lock and statement timeouts').to.be.below(30_000);
      } finally {
        await holder.query('ROLLBACK');
      }
    });
    expect(await store.main.barriers.getByStartId(command.startId)).to.equal(null);
  });

  it('R9.5 given a login with CONNECT only, when it tries to lock the start gate, then it is refused: only the product\'s runtime (a last attempt) and its functions take it', async () => {
    await withStranger(store.db, 'ql3_spec_gate', async (stranger) => {
      for (const mode of ['ACCESS SHARE', 'ACCESS EXCLUSIVE']) {
        const code = await store.db.admin(async (c) => {
          await c.query('BEGIN');
          try {
            await c.query(`SET LOCAL ROLE ${stranger}`);
            await c.query(`LOCK TABLE ql3.start_gate IN ${mode} MODE NOWAIT`);
            return 'locked';
          } catch (e) {
            return (e as { code?: string }).code;
          } finally {
            await c.query('ROLLBACK');
          }
        });
        expect(code, mode).to.equal('42501');
      }
      const fn = await store.db.admin(async (c) => (await c.query<{ ok: boolean }>(`SELECT has_function_privilege($1, 'ql3.take_start_gate(boolean)', 'EXECUTE') AS ok`, [stranger])).rows[0]?.ok);
      expect(fn).to.equal(false);
    });
  });

  it('R5.2 given no retries, when a start meets a 40001 it cannot avoid (its own stream head moved under it), then it still ends typed CONCURRENCY_EXHAUSTED having written nothing', async () => {
    const [s] = await readyRuns(1);
    const command = s!.startCommand();
    const loser = await store.loserOfAMovedHead(s!.runId);
    const error = await loser.barriers.prepare(command).then(() => null, (e: Error) => e);
    expect(error).to.be.instanceOf(ConcurrencyExhaustedError);
    expect(await store.main.barriers.getByStartId(command.startId)).to.equal(null);
    expect((await store.main.runs.getStepRun(s!.runId, s!.stepRunId))?.status).to.equal('ready');
  });
});
