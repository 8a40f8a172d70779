import { expect } from 'chai';
import Database from 'better-sqlite3';
import { SemanticConflictError, StoreUnavailableError, TransactionTimeoutError, type ToolExecutionStartCommand } from '../../domain';
import { START_STEPS, type StartStep, type StartStepHook } from '../../application/authority';
import { openSqliteStartBarrier, type SqliteStartBarrier } from '../../infrastructure/sqlite';
import { rejects } from '../../testkit/rejects';
import { setUp } from '../conformance/startBarrierConformance';
import { freshDbPath } from '../support/tmp';
import { sqliteCounts } from './support';

// A start reads first: its lookup runs in a WAL read snapshot, and an exact replay (or drift)
// is answered from it without the write lock. A new start is then decided again, from the lookup
// on, in one BEGIN IMMEDIATE: whatever another connection committed between the read and the
// write is seen there, and nothing can commit while it decides. Two connections on one file.

type Interleave = (attempt: number, step: StartStep) => Promise<void> | void;

/** Authority A on `path`, whose hook runs `interleave` with the pass number (1: the read-only lookup, 2: the BEGIN IMMEDIATE). */
const openInterleaved = async (path: string, interleave: Interleave): Promise<{ a: SqliteStartBarrier; attempts: () => number }> => {
  let attempt = 0;
  const hook: StartStepHook = async (step) => {
    if (step === 'lookup') attempt++;
    await interleave(attempt, step);
  };
  const a = await openSqliteStartBarrier({ path, hooks: { onStartStep: hook } });
  return { a, attempts: () => attempt };
};

const secondStepRun = async (a: SqliteStartBarrier, s: Awaited<ReturnType<typeof setUp>>): Promise<void> => {
  const { runId } = s;
  const toolDefinition = s.stepRun.toolDefinition!;
  await a.runs.handle({ type: 'CreateStepRun', data: { runId, stepRunId: 'second-step', kind: 'tool', toolDefinition, requestedAtMs: 1 } });
  await a.runs.handle({ type: 'MarkStepRunReady', data: { runId, stepRunId: 'second-step', requestedAtMs: 1 } });
};

describe('R3.1/R5.1 a SQLite start reads first, and a new start is decided again under BEGIN IMMEDIATE', function () {
  this.timeout(60_000);
  const opened: { close(): unknown }[] = [];
  afterEach(async () => {
    for (const o of opened.splice(0)) await o.close();
  });

  it('R4.2 an exact replay answers while another connection holds the write lock (it never asks for it)', async () => {
    const path = freshDbPath();
    const a = await openSqliteStartBarrier({ path, busyTimeoutMs: 100 });
    opened.push(a);
    const s = await setUp(a);
    const command = s.startCommand();
    const created = await a.barriers.prepare(command);
    const other = new Database(path);
    opened.push(other);
    other.exec('BEGIN IMMEDIATE');
    try {
      const replay = await a.barriers.prepare(command);
      expect(replay.outcome).to.equal('existing');
      expect(replay.barrier).to.deep.equal(created.barrier);
    } finally {
      other.exec('ROLLBACK');
    }
  });

  it('R5.1 a new start while another connection holds the write lock waits busy_timeout, then TRANSACTION_TIMEOUT with nothing written', async () => {
    const path = freshDbPath();
    const a = await openSqliteStartBarrier({ path, busyTimeoutMs: 100 });
    opened.push(a);
    const s = await setUp(a);
    const command = s.startCommand();
    const before = sqliteCounts(a);
    const other = new Database(path);
    opened.push(other);
    other.exec('BEGIN IMMEDIATE');
    try {
      const e = await rejects(a.barriers.prepare(command));
      expect(e, String(e)).to.be.instanceOf(TransactionTimeoutError);
    } finally {
      other.exec('ROLLBACK');
    }
    expect(sqliteCounts(a)).to.deep.equal(before);
    expect((await a.barriers.prepare(command)).outcome).to.equal('created');
  });

  it('R10.3 an exact replay on a read-only open returns the stored barrier; a new start there is refused', async () => {
    const path = freshDbPath();
    const w = await openSqliteStartBarrier({ path });
    const s = await setUp(w);
    const created = await w.barriers.prepare(s.startCommand());
    const fresh = await setUp(w, { prefix: 'second-' });
    await w.close();
    const r = await openSqliteStartBarrier({ path, readOnly: true });
    opened.push(r);
    const replay = await r.barriers.prepare(s.startCommand());
    expect(replay.outcome).to.equal('existing');
    expect(replay.barrier).to.deep.equal(created.barrier);
    const e = await rejects(r.barriers.prepare(fresh.startCommand()));
    expect(e, String(e)).to.be.instanceOf(StoreUnavailableError);
    expect((e as StoreUnavailableError).reason).to.equal('read_only');
  });

  it('R4.2 an exact replay is one read (its lookup only); a new start is that read, then one BEGIN IMMEDIATE from the lookup on', async () => {
    const steps: StartStep[] = [];
    const path = freshDbPath();
    const a = await openSqliteStartBarrier({ path, hooks: { onStartStep: (step) => void steps.push(step) } });
    opened.push(a);
    const s = await setUp(a);
    expect((await a.barriers.prepare(s.startCommand())).outcome).to.equal('created');
    expect(steps).to.deep.equal(['lookup', ...START_STEPS]);
    steps.length = 0;
    expect((await a.barriers.prepare(s.startCommand())).outcome).to.equal('existing');
    expect(steps).to.deep.equal(['lookup']);
  });

  for (const step of START_STEPS) {
    it(`R5.1 from its lookup on, a new start holds the write lock: another connection cannot write after ${step}`, async () => {
      const path = freshDbPath();
      let refused: unknown;
      const { a } = await openInterleaved(path, (attempt, at) => {
        if (attempt !== 2 || at !== step) return;
        const other = new Database(path, { timeout: 0 });
        try {
          other.exec('BEGIN IMMEDIATE');
          other.exec('ROLLBACK');
        } catch (e) {
          refused = e;
        } finally {
          other.close();
        }
      });
      opened.push(a);
      const s = await setUp(a);
      expect((await a.barriers.prepare(s.startCommand())).outcome).to.equal('created');
      expect(String(refused)).to.match(/locked|busy/i);
    });
  }

  describe('R4.2 another connection commits between the read and the write', () => {
    const race = async (
      winner: (b: SqliteStartBarrier, command: ToolExecutionStartCommand, s: Awaited<ReturnType<typeof setUp>>) => Promise<unknown>,
    ) => {
      const path = freshDbPath();
      let b!: SqliteStartBarrier;
      let command!: ToolExecutionStartCommand;
      let s!: Awaited<ReturnType<typeof setUp>>;
      const { a, attempts } = await openInterleaved(path, async (attempt, step) => {
        if (attempt === 1 && step === 'lookup') await winner(b, command, s);
      });
      opened.push(a);
      b = await openSqliteStartBarrier({ path });
      opened.push(b);
      s = await setUp(a);
      await secondStepRun(a, s);
      command = s.startCommand();
      return { a, b, s, command, attempts };
    };

    it('R4.2 the same start committed by the other after the read: this one is decided again under BEGIN IMMEDIATE and returns existing, the one barrier', async () => {
      let won: unknown;
      const { a, command, attempts, s } = await race(async (b, c) => void (won = await b.barriers.prepare(c)));
      const result = await a.barriers.prepare(command);
      expect(attempts()).to.equal(2);
      expect(result.outcome).to.equal('existing');
      expect(result.barrier).to.deep.equal((won as { barrier: unknown }).barrier);
      expect((await a.runs.readStream(s.runId)).filter((e) => e.event.type === 'ToolExecutionStartBarrierCommitted')).to.have.length(1);
      expect(sqliteCounts(a)['tool_execution_start_barriers']).to.equal(1);
    });

    it('R4.2 the same startId with other content committed by the other: this one is the typed conflict, nothing of it written', async () => {
      const { a, command, attempts } = await race((b, c) => b.barriers.prepare({ ...c, admission: { ...c.admission, timeoutMs: 31_000 } }));
      const e = await rejects(a.barriers.prepare(command));
      expect(attempts()).to.equal(2);
      expect(e, String(e)).to.be.instanceOf(SemanticConflictError);
      expect((e as SemanticConflictError).identity).to.equal('startId');
      expect(sqliteCounts(a)['tool_execution_start_barriers']).to.equal(1);
    });

    it('R4.1 another start of the same attempt committed by the other: this one is the attempt conflict, nothing of it written', async () => {
      const { a, command, attempts, s } = await race((b) => b.barriers.prepare(s.startCommand(s.stepRun, 'other')));
      const e = await rejects(a.barriers.prepare(command));
      expect(attempts()).to.equal(2);
      expect(e, String(e)).to.be.instanceOf(SemanticConflictError);
      expect((e as SemanticConflictError).identity).to.equal('attempt');
      expect(await a.barriers.getByStartId(command.startId)).to.equal(null);
    });

    it('R3.5 a start of another StepRun of the same Run committed by the other: this one is redone on the new Run version and created', async () => {
      let won!: { barrier: { record: { runEvent: { runEventSequence: number } } } };
      const { a, command, attempts } = await race(async (b, _c, s) => {
        const second = (await b.runs.getStepRun(s.runId, 'second-step'))!;
        const c2 = s.startCommand(second, 'second');
        won = (await b.barriers.prepare({ ...c2, stepRun: { ...c2.stepRun, stepRunId: 'second-step' } })) as typeof won;
      });
      const result = await a.barriers.prepare(command);
      expect(attempts()).to.equal(2);
      expect(result.outcome).to.equal('created');
      expect(result.barrier.record.runEvent.runEventSequence).to.equal(won.barrier.record.runEvent.runEventSequence + 5);
      expect((await a.recovery.verify()).ok).to.equal(true);
    });

    for (const step of START_STEPS) {
      it(`R3.9 on the start decided again, a failure after ${step} rolls back every fact (the other's start stays)`, async () => {
        let failOnRetry = true;
        const path = freshDbPath();
        let b!: SqliteStartBarrier;
        let s!: Awaited<ReturnType<typeof setUp>>;
        const { a, attempts } = await openInterleaved(path, async (attempt, at) => {
          if (attempt === 1 && at === 'lookup') {
            const second = (await b.runs.getStepRun(s.runId, 'second-step'))!;
            const c2 = s.startCommand(second, 'second');
            await b.barriers.prepare({ ...c2, stepRun: { ...c2.stepRun, stepRunId: 'second-step' } });
          }
          if (attempt === 2 && at === step && failOnRetry) throw new Error(`injected fault after ${step}`);
        });
        opened.push(a);
        b = await openSqliteStartBarrier({ path });
        opened.push(b);
        s = await setUp(a);
        await secondStepRun(a, s);
        const command = s.startCommand();
        const e = await rejects(a.barriers.prepare(command));
        expect(e.message).to.contain(`injected fault after ${step}`);
        expect(attempts()).to.equal(2);
        const after = sqliteCounts(a);
        expect(after['tool_execution_start_barriers']).to.equal(1); // the other's
        expect((await a.runs.getStepRun(s.runId, s.stepRunId))?.status).to.equal('ready');
        expect(await a.barriers.getByStartId(command.startId)).to.equal(null);
        failOnRetry = false;
        expect((await a.barriers.prepare(command)).outcome).to.equal('created');
        expect((await a.recovery.verify()).ok).to.equal(true);
      });
    }
  });
});
