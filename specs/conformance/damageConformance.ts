import { expect } from 'chai';
import { CorruptRecordError, REPLAY_IDENTITIES, SemanticConflictError, replayKeysOf, type ToolExecutionStartCommand } from '../../domain';
import { replayValuesOf } from '../../projections/rows';
import type { Scenario } from '../../domain/scenario';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { buildOnce, runCli } from '../cli/cliSuite';
import { mutateCell, type DamageSession } from '../../testkit/damage';
import { rejects } from '../../testkit/rejects';
import { setUp } from './startBarrierConformance';

// R5.3 and R9.3 on every backend (memory, SQLite, PostgreSQL) from one source: the owner
// (triggers and foreign keys off) changes one stored cell, deletes one row or duplicates one
// identity at a time through the shared damage session; then every read path, API and CLI,
// fails closed with CorruptRecordError (CLI exit 5), never null, never an empty list, never a
// best guess, and a replayed prepare never answers from damaged rows. Each change is put back
// before the next one, and the store reads healthy again after.

export interface DamageStore {
  /** Reads the store the damage session writes. */
  readonly authority: RecoverableStartBarrierAuthority;
  readonly damage: DamageSession;
  /** The CLI's arguments naming this store (`--db PATH`, `--postgres URL`); none for memory. */
  readonly cli?: readonly string[];
  close(): Promise<void>;
}

export interface DamageBackend {
  readonly name: string;
  /** `table.column` cells the schema itself refuses to damage even with triggers off (CHECK). */
  readonly guarded: readonly string[];
  /** Whether the store keeps the event chain of R9.2 (not in memory: no file holds its rows). */
  readonly chained: boolean;
  /**
   * Whether the store keeps its replay identities in a table of their own (default); where it
   * does not (SQLite), each identity is the key of the row that holds it, swept with that row.
   */
  readonly replayIndex?: boolean;
  /** A fresh store; `seed` writes into it before the damage session opens. */
  open(seed: (authority: RecoverableStartBarrierAuthority) => Promise<void>): Promise<DamageStore>;
}

/** The barrier row and the four fact rows of a start, each with the column that names the start. */
const START_TABLES = ['tool_execution_start_barriers', 'security_audit_events', 'trace_anchors', 'audit_receipts', 'step_run_mutations'] as const;
const EVENT_COLUMNS = ['stream_id', 'stream_position', 'event_id', 'event_type', 'data_json', 'committed_at_ms'] as const;

export const damageSuite = (backend: DamageBackend): void => {
  const indexed = backend.replayIndex ?? true;
  const IDENTITY_ROWS = indexed ? REPLAY_IDENTITIES.length : 0;
  describe(`damaged records fail closed (R5.3): ${backend.name}`, function () {
    this.timeout(180_000);
    let store: DamageStore;
    /** The start's replay-index rows, where the store keeps them. */
    const indexRows = async (where: string, params: readonly unknown[]) =>
      indexed ? (await store.damage.rows('start_replay_identities', where, params)).map((r) => ['start_replay_identities', r] as const) : [];
    let s: Scenario;
    let command: ToolExecutionStartCommand;
    let version: number;
    let sequence: number;
    let f: Scenario;
    let finished: ToolExecutionStartCommand;
    let l: Scenario;
    let lost: ToolExecutionStartCommand;
    let retried: ToolExecutionStartCommand;
    let unstarted: ToolExecutionStartCommand;

    before(async () => {
      store = await backend.open(async (a) => {
        s = await setUp(a, { withApproval: true });
        command = s.startCommand();
        const { record } = (await a.barriers.prepare(command)).barrier;
        version = record.attempt.startedStepRunVersion;
        sequence = record.runEvent.runEventSequence;
        await a.barriers.prepare(command); // a second, untouched read path
        // a second Run whose start finished: its outcome row is a read model every read checks
        f = await setUp(a);
        finished = f.startCommand();
        await a.barriers.prepare(finished);
        await a.recovery.resolve(finished.startId, 'completed', { decidedBy: 'damage-suite', reason: 'tool_succeeded' });
        // a third whose first attempt was lost and whose retry completed: two attempts in its history
        l = await setUp(a);
        lost = l.startCommand();
        await a.barriers.prepare(lost);
        await a.recovery.resolve(lost.startId, 'lost', { decidedBy: 'damage-suite', reason: 'worker_lost' });
        await a.runs.handle({ type: 'MarkStepRunReady', data: { runId: l.runId, stepRunId: l.stepRunId, requestedAtMs: lost.requestedAtMs + 1 } });
        retried = l.startCommand((await a.runs.getStepRun(l.runId, l.stepRunId))!, 'retry');
        await a.barriers.prepare(retried);
        await a.recovery.resolve(retried.startId, 'completed', { decidedBy: 'damage-suite', reason: 'tool_succeeded' });
        // a fourth, ready and never started: a new command the damaged index must not refuse as drift
        unstarted = (await setUp(a)).startCommand();
      });
    });
    after(async () => {
      await store?.close();
    });

    const a = () => store.authority;
    const outcome = (p: Promise<unknown>) => p.then((v) => v, (e: unknown) => e);

    /** A read that must fail closed: CorruptRecordError, never a value, never null, never []. */
    const expectCorrupt = async (what: string, read: Promise<unknown>): Promise<void> => {
      const r = await outcome(read);
      expect(r instanceof CorruptRecordError, `${what}: ${r instanceof Error ? r.message : JSON.stringify(r)?.slice(0, 200)}`).to.equal(true);
    };

    /** Every read path of the damaged start fails closed; a replayed prepare fails typed. */
    const expectFailsClosed = async (what: string): Promise<void> => {
      await expectCorrupt(`${what}: getByStartId`, a().barriers.getByStartId(command.startId));
      await expectCorrupt(`${what}: getByStepRunAttempt`, a().barriers.getByStepRunAttempt(s.runId, s.stepRunId, version));
      await expectCorrupt(`${what}: recovery.lookup`, a().recovery.lookup('startId', command.startId));
      await expectCorrupt(`${what}: recovery.outcome`, a().recovery.outcome(command.startId));
      await expectCorrupt(`${what}: recovery.history`, a().recovery.history(s.runId, s.stepRunId));
      await expectCorrupt(`${what}: recovery.inDoubt`, a().recovery.inDoubt({ runId: s.runId }));
      const replay = await rejects(a().barriers.prepare(command));
      // a damaged digest in the index reads as a different command bound to that identity (R4.3)
      expect(replay instanceof CorruptRecordError || replay instanceof SemanticConflictError, `${what}: prepare ${replay.message}`).to.equal(true);
    };

    /** The CLI's read commands on the damaged store: exit 5 each (R9.3). */
    const expectCliExit5 = async (what: string, commands: readonly (readonly string[])[]): Promise<void> => {
      if (store.cli === undefined) return;
      buildOnce();
      for (const args of commands) {
        const r = await runCli([...args, ...store.cli]);
        expect(r.code, `${what}: ${args.join(' ')}: ${r.stdout.slice(0, 300)} ${r.stderr.slice(0, 300)}`).to.equal(5);
      }
    };

    const expectHealthy = async (): Promise<void> => {
      expect((await a().barriers.getByStartId(command.startId))?.record.startId).to.equal(command.startId);
      expect((await a().barriers.getByStepRunAttempt(s.runId, s.stepRunId, version))?.record.startId).to.equal(command.startId);
      expect((await a().barriers.prepare(command)).outcome).to.equal('existing');
      expect((await a().recovery.inDoubt({ runId: s.runId })).map((d) => d.startId)).to.deep.equal([command.startId]);
      expect((await a().recovery.history(f.runId, f.stepRunId)).map((h) => h.outcome?.outcome)).to.deep.equal(['completed']);
      expect((await a().recovery.history(l.runId, l.stepRunId)).map((h) => h.outcome?.outcome)).to.deep.equal(['lost', 'completed']);
      expect((await a().runs.readStream(s.runId)).length).to.equal(sequence + 1);
    };

    /** Change every cell of one row alone, check every read, put it back. Returns the cells the schema refused. */
    const sweep = async (table: string, where: string, params: readonly unknown[], columns: readonly string[] | undefined, to: (value: unknown, column: string) => unknown = mutateCell) => {
      const [row] = await store.damage.rows(table, where, params);
      expect(row, `${table} ${where} ${String(params)}`).to.not.equal(undefined);
      const refused: string[] = [];
      let key = String(row!._key);
      let swept = 0;
      for (const column of columns ?? Object.keys(row!).filter((c) => c !== '_key')) {
        const from = row![column];
        const damaged = await store.damage.set(table, key, column, to(from, column));
        key = damaged.key;
        swept++;
        if (!damaged.applied) {
          refused.push(`${table}.${column}`);
          continue;
        }
        try {
          await expectFailsClosed(`${table}.${column}`);
        } finally {
          const back = await store.damage.set(table, key, column, from);
          expect(back.applied, `${table}.${column} put back: ${back.reason ?? ''}`).to.equal(true);
          key = back.key;
        }
      }
      return { refused, swept };
    };

    it('R5.3 every cell of the barrier row and of each fact row, changed alone, is detected', async () => {
      let swept = 0;
      const refused: string[] = [];
      for (const table of START_TABLES) {
        const r = await sweep(table, 'start_id = ?', [command.startId], undefined);
        swept += r.swept;
        refused.push(...r.refused);
      }
      expect(swept).to.equal(18 + 6 + 7 + 6 + 14); // every column of the five tables (their JSON is in the events, swept below)
      expect(refused).to.deep.equal(backend.guarded);
      await expectHealthy();
    });

    it('R5.3 every cell of the five event rows of the start, changed alone, is detected', async () => {
      for (let position = sequence - 3; position <= sequence + 1; position++) {
        const r = await sweep('events', 'stream_id = ? AND stream_position = ?', [`run-${s.runId}`, position], EVENT_COLUMNS);
        expect(r.refused, `event @${position}`).to.deep.equal([]);
      }
      await expectHealthy();
    });

    if (indexed) it('R5.3 every cell of the seven replay-identity rows, changed alone, is detected', async () => {
      // identity has a CHECK constraint on both backends: move it to another identity's name
      const rotate = (value: unknown, column: string) =>
        column === 'identity' ? REPLAY_IDENTITIES[(REPLAY_IDENTITIES.indexOf(value as never) + 1) % REPLAY_IDENTITIES.length] : mutateCell(value);
      for (const identity of REPLAY_IDENTITIES) {
        const r = await sweep('start_replay_identities', 'start_id = ? AND identity = ?', [command.startId, identity], undefined, rotate);
        expect(r.swept, identity).to.equal(3); // identity, value, start_id: the command digest is the barrier's
        expect(r.refused, identity).to.deep.equal([]);
      }
      await expectHealthy();
    });

    /** Delete the one row `where` selects, run `check`, put the row back. */
    const without = async (table: string, where: string, params: readonly unknown[], check: (what: string) => Promise<void>): Promise<void> => {
      const rows = await store.damage.rows(table, where, params);
      expect(rows, `${table} ${where} ${String(params)}`).to.have.length(1);
      const gone = await store.damage.remove(table, String(rows[0]!._key));
      try {
        await check(`${table} ${String(params)} deleted`);
      } finally {
        await gone.undo();
      }
    };

    /** Move one cell by `delta`; `undo` sets it back. */
    const shift = async (table: string, where: string, params: readonly unknown[], column: string, delta: number): Promise<() => Promise<void>> => {
      const [row] = await store.damage.rows(table, where, params);
      const was = Number(row![column]);
      const moved = await store.damage.set(table, String(row!._key), column, was + delta);
      expect(moved.applied, `${table}.${column}: ${moved.reason ?? ''}`).to.equal(true);
      return async () => void (await store.damage.set(table, String(moved.key), column, was));
    };
    /** Damage made by `steps` (each returns its undo), `check` run on it, then undone in reverse. */
    const withDamage = async (steps: (() => Promise<(() => Promise<void>)[]>)[], check: () => Promise<void>): Promise<void> => {
      const undo: (() => Promise<void>)[] = [];
      try {
        for (const step of steps) undo.push(...(await step()));
        await check();
      } finally {
        for (const u of undo.reverse()) await u();
      }
    };
    const removeAll = (table: string, where: string, params: readonly unknown[]) => async () => {
      const undo: (() => Promise<void>)[] = [];
      for (const row of await store.damage.rows(table, where, params)) undo.push((await store.damage.remove(table, String(row._key))).undo);
      return undo;
    };

    it("R9.3 an outcome for a start whose StepRun's own history was damaged in the middle of the stream (its StepRunCreated deleted, or its tool definition changed): resolve and FailStepRun are CORRUPT_RECORD, nothing is written, the start stays in doubt", async () => {
      const stream = `run-${s.runId}`;
      const attempts = async (what: string) => {
        await expectCorrupt(`${what}: resolve`, a().recovery.resolve(command.startId, 'lost', { decidedBy: 'damage-suite', reason: 'worker_lost' }));
        const fail = { runId: s.runId, stepRunId: s.stepRunId, decidedBy: 'damage-suite', reason: 'tool_failed' as const, requestedAtMs: command.requestedAtMs + 10 };
        await expectCorrupt(`${what}: FailStepRun`, a().runs.handle({ type: 'FailStepRun', data: fail }));
      };
      await without('events', 'stream_id = ? AND event_type = ?', [stream, 'StepRunCreated'], attempts);
      const [row] = await store.damage.rows('events', 'stream_id = ? AND event_type = ?', [stream, 'StepRunCreated']);
      const data = JSON.parse(String(row!.data_json)) as { toolDefinition: Record<string, unknown> };
      data.toolDefinition = { ...data.toolDefinition, digest: `sha256:${'e'.repeat(64)}` };
      const changed = async () => {
        const set = await store.damage.set('events', String(row!._key), 'data_json', JSON.stringify(data));
        expect(set.applied, set.reason).to.equal(true);
        return [async () => void (await store.damage.set('events', String(set.key), 'data_json', row!.data_json))];
      };
      await withDamage([changed], () => attempts('StepRunCreated with another tool definition'));
      await expectHealthy();
    });

    // The stream and Run heads are rows only in the SQL stores (memory keeps no stream head row to move).
    if (backend.chained) it("R9.3 a stream's last events deleted and both Run heads set back to match: readStream fails closed, never a shorter stream (the StepRun heads and barriers account for more); a lifecycle command on the head left past its log is CORRUPT_RECORD, never a refused move", async () => {
      for (const [k, drop] of [[f, 1], [s, 1], [l, 2]] as const) {
        const stream = `run-${k.runId}`;
        const events = (await a().runs.readStream(k.runId)).length;
        const last = Array.from({ length: drop }, (_, i) => events - i);
        await withDamage(
          [
            ...last.map((p) => removeAll('events', 'stream_id = ? AND stream_position = ?', [stream, p])),
            async () => [await shift('streams', 'stream_id = ?', [stream], 'version', -drop)],
            async () => [await shift('runs', 'run_id = ?', [k.runId], 'version', -drop)],
          ],
          async () => {
            await expectCorrupt(`${stream} without its last ${drop} event(s): readStream`, a().runs.readStream(k.runId));
            if (k !== f) return;
            // a decision on the finished StepRun's head (completed, past its log) is damage, not a refused move; nothing is written
            const logged = (await store.damage.rows('events', 'stream_id = ?', [stream])).length;
            const at = { runId: k.runId, stepRunId: k.stepRunId, requestedAtMs: finished.requestedAtMs + 10 };
            await expectCorrupt('MarkStepRunReady', a().runs.handle({ type: 'MarkStepRunReady', data: at }));
            await expectCorrupt('CompleteStepRun', a().runs.handle({ type: 'CompleteStepRun', data: { ...at, decidedBy: 'damage-suite', reason: 'tool_succeeded' } }));
            expect((await store.damage.rows('events', 'stream_id = ?', [stream])).length).to.equal(logged);
          },
        );
      }
      await expectHealthy();
    });

    if (backend.chained) it("R9.3 a Run's log, stream, Run and StepRun heads all deleted, its start barriers kept: readStream and getStepRun fail closed, never [] or null", async () => {
      const stream = `run-${f.runId}`;
      await withDamage(
        [removeAll('events', 'stream_id = ?', [stream]), removeAll('streams', 'stream_id = ?', [stream]), removeAll('step_runs', 'run_id = ?', [f.runId]), removeAll('runs', 'run_id = ?', [f.runId])],
        async () => {
          await expectCorrupt('readStream', a().runs.readStream(f.runId));
          await expectCorrupt('getStepRun', a().runs.getStepRun(f.runId, f.stepRunId));
        },
      );
      await expectHealthy();
    });

    // PostgreSQL's global position is an identity column no UPDATE sets: its case is in specs/recovery/postgresDamage.int.spec.ts.
    if (backend.chained && backend.name === 'SQLite') it('R9.2 R9.3 an event moved in the global order (its global position past a later event of its stream): readStream fails closed', async () => {
      await withDamage([async () => [await shift('events', 'stream_id = ? AND stream_position = 1', [`run-${f.runId}`], 'global_position', 1_000_000)]], () =>
        expectCorrupt('readStream', a().runs.readStream(f.runId)),
      );
      await expectHealthy();
    });

    it('R9.3 each row of a start deleted alone (barrier, facts, events, identities) fails every read path closed', async () => {
      for (const table of START_TABLES) await without(table, 'start_id = ?', [command.startId], expectFailsClosed);
      for (let position = sequence - 3; position <= sequence + 1; position++) {
        await without('events', 'stream_id = ? AND stream_position = ?', [`run-${s.runId}`, position], async (what) => {
          await expectFailsClosed(what);
          await expectCorrupt(`${what}: readStream`, a().runs.readStream(s.runId));
        });
      }
      if (indexed) for (const identity of REPLAY_IDENTITIES) await without('start_replay_identities', 'start_id = ? AND identity = ?', [command.startId, identity], expectFailsClosed);
      await expectHealthy();
    });

    it('R9.3 a running StepRun whose barrier row is gone: in-doubt and history raise CORRUPT_RECORD, never list nothing (CLI exit 5)', async () => {
      await without('tool_execution_start_barriers', 'start_id = ?', [command.startId], async (what) => {
        await expectCorrupt(`${what}: inDoubt()`, a().recovery.inDoubt());
        await expectCorrupt(`${what}: inDoubt(project)`, a().recovery.inDoubt({ projectId: s.projectId }));
        await expectCorrupt(`${what}: history`, a().recovery.history(s.runId, s.stepRunId));
        await expectCliExit5(what, [['in-doubt'], ['history', s.runId, s.stepRunId], ['show', '--start-id', command.startId], ['verify']]);
      });
      await without('step_runs', 'run_id = ? AND step_run_id = ?', [s.runId, s.stepRunId], async (what) => {
        await expectCorrupt(`${what}: inDoubt`, a().recovery.inDoubt({ runId: s.runId }));
        await expectCorrupt(`${what}: history`, a().recovery.history(s.runId, s.stepRunId));
      });
      await expectHealthy();
    });

    it('R9.3 a finished StepRun whose outcome row is gone: show, history, outcome, note, purge-note and resolve (the same outcome or another) raise CORRUPT_RECORD, never a precondition (CLI exit 5)', async () => {
      await without('start_outcomes', 'start_id = ?', [finished.startId], async (what) => {
        await expectCorrupt(`${what}: outcome`, a().recovery.outcome(finished.startId));
        await expectCorrupt(`${what}: history`, a().recovery.history(f.runId, f.stepRunId));
        await expectCorrupt(`${what}: note`, a().recovery.note(finished.startId));
        await expectCorrupt(`${what}: purge-note`, a().recovery.purgeNote(finished.startId));
        await expectCorrupt(`${what}: resolve completed`, a().recovery.resolve(finished.startId, 'completed', { decidedBy: 'damage-suite', reason: 'tool_succeeded' }));
        await expectCorrupt(`${what}: resolve failed`, a().recovery.resolve(finished.startId, 'failed', { decidedBy: 'damage-suite', reason: 'tool_failed' }));
        await expectCliExit5(what, [['show', '--start-id', finished.startId], ['history', f.runId, f.stepRunId]]);
      });
      await expectHealthy();
    });

    /** The start's replay-index rows deleted, and its barrier row too unless `keepBarrier` (its facts and events stay); `check` runs, then they are put back. */
    const withoutStart = async (startId: string, check: (what: string) => Promise<void>, keepBarrier = false): Promise<void> => {
      const rows = [
        ...(keepBarrier ? [] : (await store.damage.rows('tool_execution_start_barriers', 'start_id = ?', [startId])).map((r) => ['tool_execution_start_barriers', r] as const)),
        ...(await indexRows('start_id = ?', [startId])),
      ];
      expect(rows).to.have.length((keepBarrier ? 0 : 1) + IDENTITY_ROWS);
      const gone = [];
      for (const [table, row] of rows) gone.push(await store.damage.remove(table, String(row._key)));
      try {
        await check(`${startId} ${keepBarrier ? 'index rows' : 'barrier and index rows'} deleted`);
      } finally {
        for (const g of gone.reverse()) await g.undo();
      }
    };

    it('R9.3 a start whose seven replay-index rows are gone (barrier, facts and events kept), or its barrier too: its lost-response replay is CORRUPT_RECORD, never refused as a stale command', async () => {
      for (const c of [command, finished, lost]) {
        for (const keepBarrier of indexed ? [true, false] : [false]) {
          await withoutStart(c.startId, async (what) => {
            const e = await rejects(a().barriers.prepare(c));
            expect(e instanceof CorruptRecordError, `${what}: prepare ${e.name} ${e.message}`).to.equal(true);
          }, keepBarrier);
        }
      }
      await expectHealthy();
    });

    it('R9.3 a start whose barrier and replay-index rows are gone, its facts and events kept: reads by start id and by attempt raise CORRUPT_RECORD, never null (CLI exit 5)', async () => {
      const cases = [
        { c: command, runId: s.runId, stepRunId: s.stepRunId, attempt: version },
        { c: finished, runId: f.runId, stepRunId: f.stepRunId, attempt: 3 },
        { c: lost, runId: l.runId, stepRunId: l.stepRunId, attempt: 3 },
      ];
      for (const k of cases) {
        const record = (await a().barriers.getByStartId(k.c.startId))!.record;
        expect(record.attempt.startedStepRunVersion).to.equal(k.attempt);
        const values = { mutationId: record.mutation.mutationId, runEventId: record.runEvent.runEventId, traceId: record.trace.traceId, auditEventId: record.audit.auditEventId, auditReceiptId: record.audit.auditReceiptId };
        await withoutStart(k.c.startId, async (what) => {
          for (const [identity, value] of Object.entries(values)) await expectCorrupt(`${what}: lookup ${identity}`, a().recovery.lookup(identity as keyof typeof values, value));
          await expectCorrupt(`${what}: getByStartId`, a().barriers.getByStartId(k.c.startId));
          await expectCorrupt(`${what}: getByStepRunAttempt`, a().barriers.getByStepRunAttempt(k.runId, k.stepRunId, k.attempt));
          await expectCorrupt(`${what}: lookup startId`, a().recovery.lookup('startId', k.c.startId));
          await expectCorrupt(`${what}: lookup attempt`, a().recovery.lookup('attempt', { runId: k.runId, stepRunId: k.stepRunId, startedStepRunVersion: k.attempt }));
          await expectCliExit5(what, [['show', '--start-id', k.c.startId]]);
        });
      }
      // an id and an attempt nothing names read as none, as before
      expect(await a().barriers.getByStartId('never-started')).to.equal(null);
      expect(await a().barriers.getByStepRunAttempt(s.runId, s.stepRunId, version + 1)).to.equal(null);
      expect(await a().recovery.lookup('attempt', { runId: s.runId, stepRunId: s.stepRunId, startedStepRunVersion: version + 1 })).to.equal(null);
      await expectHealthy();
    });

    it("R9.3 a StepRun whose head row is gone: getStepRun raises CORRUPT_RECORD, never null, while the Run's log creates it", async () => {
      for (const [runId, stepRunId] of [[s.runId, s.stepRunId], [f.runId, f.stepRunId], [l.runId, l.stepRunId]] as const) {
        expect((await a().runs.getStepRun(runId, stepRunId))?.stepRunId).to.equal(stepRunId);
        await without('step_runs', 'run_id = ? AND step_run_id = ?', [runId, stepRunId], (what) => expectCorrupt(`${what}: getStepRun`, a().runs.getStepRun(runId, stepRunId)));
      }
      expect(await a().runs.getStepRun(s.runId, 'never-created')).to.equal(null);
      await expectHealthy();
    });

    it("R9.3 a StepRun never started whose head row is gone: history raises CORRUPT_RECORD, never [], while the Run's log creates it (CLI exit 5)", async () => {
      const { runId, stepRunId } = unstarted.stepRun;
      expect(await a().recovery.history(runId, stepRunId)).to.deep.equal([]);
      await without('step_runs', 'run_id = ? AND step_run_id = ?', [runId, stepRunId], async (what) => {
        await expectCorrupt(`${what}: history`, a().recovery.history(runId, stepRunId));
        await expectCliExit5(what, [['history', runId, stepRunId]]);
      });
      expect(await a().recovery.history(runId, 'never-created')).to.deep.equal([]);
      await expectHealthy();
    });

    it("R9.3 a start in doubt whose barrier and StepRun rows both name another Project: its Project's in-doubt list raises CORRUPT_RECORD, never leaves it out", async () => {
      const moved: { table: string; key: string; from: unknown }[] = [];
      try {
        for (const [table, where, params] of [
          ['tool_execution_start_barriers', 'start_id = ?', [command.startId]],
          ['step_runs', 'run_id = ? AND step_run_id = ?', [s.runId, s.stepRunId]],
        ] as const) {
          const [row] = await store.damage.rows(table, where, params);
          const set = await store.damage.set(table, String(row!._key), 'project_id', 'project-elsewhere');
          expect(set.applied, `${table}.project_id: ${set.reason ?? ''}`).to.equal(true);
          moved.push({ table, key: set.key, from: row!.project_id });
        }
        await expectCorrupt('inDoubt(project)', a().recovery.inDoubt({ projectId: s.projectId }));
      } finally {
        for (const m of moved.reverse()) expect((await store.damage.set(m.table, m.key, 'project_id', m.from)).applied).to.equal(true);
      }
      await expectHealthy();
    });

    it("R9.3 a finished StepRun's history with a barrier row gone (its last attempt, or an earlier one) raises CORRUPT_RECORD, never a shorter list (CLI exit 5)", async () => {
      for (const startId of [finished.startId]) {
        await without('tool_execution_start_barriers', 'start_id = ?', [startId], async (what) => {
          await expectCorrupt(`${what}: history`, a().recovery.history(f.runId, f.stepRunId));
          await expectCliExit5(what, [['history', f.runId, f.stepRunId]]);
        });
        await withoutStart(startId, (what) => expectCorrupt(`${what}: history`, a().recovery.history(f.runId, f.stepRunId)));
      }
      for (const startId of [lost.startId, retried.startId]) {
        await without('tool_execution_start_barriers', 'start_id = ?', [startId], (what) => expectCorrupt(`${what}: history`, a().recovery.history(l.runId, l.stepRunId)));
        await withoutStart(startId, (what) => expectCorrupt(`${what}: history`, a().recovery.history(l.runId, l.stepRunId)));
      }
      await expectHealthy();
    });

    it('R9.3 every cell of the outcome row of a finished start, changed alone: outcome and history fail closed, verify reports it', async () => {
      const [row] = await store.damage.rows('start_outcomes', 'start_id = ?', [finished.startId]);
      let key = String(row!._key);
      const columns = Object.keys(row!).filter((c) => c !== '_key');
      expect(columns.length).to.be.greaterThan(10);
      for (const column of columns) {
        const damaged = await store.damage.set('start_outcomes', key, column, mutateCell(row![column]));
        if (!damaged.applied) {
          // the schema itself refuses it (PostgreSQL keeps CHECK constraints with triggers off)
          expect(damaged.reason, `start_outcomes.${column}`).to.match(/check constraint/i);
          continue;
        }
        key = damaged.key;
        try {
          await expectCorrupt(`start_outcomes.${column}: outcome`, a().recovery.outcome(finished.startId));
          await expectCorrupt(`start_outcomes.${column}: history`, a().recovery.history(f.runId, f.stepRunId));
          expect((await a().recovery.verify()).ok, `start_outcomes.${column}: verify`).to.equal(false);
        } finally {
          const back = await store.damage.set('start_outcomes', key, column, row![column]);
          expect(back.applied).to.equal(true);
          key = back.key;
        }
      }
      await expectHealthy();
    });

    it('R9.3 a gap in a stream (one lifecycle event deleted) fails readStream closed', async () => {
      await without('events', 'stream_id = ? AND stream_position = ?', [`run-${s.runId}`, 1], (what) => expectCorrupt(what, a().runs.readStream(s.runId)));
      await expectHealthy();
    });

    /** Set these cells, run the check, put each back. */
    const withCells = async (cells: readonly (readonly [table: string, where: string, params: readonly unknown[], column: string, to: (v: unknown) => unknown])[], check: () => Promise<void>): Promise<void> => {
      const back: (() => Promise<unknown>)[] = [];
      try {
        for (const [table, where, params, column, to] of cells) {
          const [row] = await store.damage.rows(table, where, params);
          const done = await store.damage.set(table, String(row!._key), column, to(row![column]));
          expect(done.applied, `${table}.${column}: ${done.reason ?? ''}`).to.equal(true);
          back.unshift(() => store.damage.set(table, done.key, column, row![column]));
        }
        await check();
      } finally {
        for (const undo of back) await undo();
      }
    };

    it("R9.3 a start whose barrier, replay-index and StepRun mutation rows are all gone, its events kept: reads by start id raise CORRUPT_RECORD (the Run's log holds its barrier event), never null", async () => {
      const rows = [
        ...(await store.damage.rows('tool_execution_start_barriers', 'start_id = ?', [finished.startId])).map((r) => ['tool_execution_start_barriers', r] as const),
        ...(await indexRows('start_id = ?', [finished.startId])),
        ...(await store.damage.rows('step_run_mutations', 'start_id = ?', [finished.startId])).map((r) => ['step_run_mutations', r] as const),
      ];
      expect(rows).to.have.length(2 + IDENTITY_ROWS);
      const gone = [];
      for (const [table, row] of rows) gone.push(await store.damage.remove(table, String(row._key)));
      try {
        await expectCorrupt('getByStartId', a().barriers.getByStartId(finished.startId));
        await expectCorrupt("lookup('startId')", a().recovery.lookup('startId', finished.startId));
        await expectCorrupt('outcome', a().recovery.outcome(finished.startId));
      } finally {
        for (const g of gone.reverse()) await g.undo();
      }
      await expectHealthy();
    });

    if (backend.chained) it("R9.3 a Run whose head rows are gone (Run and stream), its log and StepRun kept: getStepRun, prepare and a lifecycle command raise CORRUPT_RECORD, never null or run_not_found", async () => {
      const rows = [
        ...(await store.damage.rows('runs', 'run_id = ?', [f.runId])).map((r) => ['runs', r] as const),
        ...(await store.damage.rows('streams', 'stream_id = ?', [`run-${f.runId}`])).map((r) => ['streams', r] as const),
      ];
      expect(rows).to.have.length(2);
      const current = (await a().runs.getStepRun(f.runId, f.stepRunId))!;
      const gone = [];
      for (const [table, row] of rows) gone.push(await store.damage.remove(table, String(row._key)));
      try {
        await expectCorrupt('getStepRun', a().runs.getStepRun(f.runId, f.stepRunId));
        await expectCorrupt('prepare of a new attempt', a().barriers.prepare(f.startCommand(current, 'again')));
        await expectCorrupt('CreateStepRun', a().runs.handle({ ...f.lifecycle[1]!, data: { ...(f.lifecycle[1]!.data as object), stepRunId: 'another-step' } } as never));
      } finally {
        for (const g of gone.reverse()) await g.undo();
      }
      await expectHealthy();
    });

    it('R9.3 an outcome for a start whose evidence is damaged (a fact row or its barrier row gone) is CORRUPT_RECORD and writes nothing: the outcome would take the start off the in-doubt list with nothing sound behind it', async () => {
      const complete = { type: 'CompleteStepRun', data: { runId: s.runId, stepRunId: s.stepRunId, decidedBy: 'damage-suite', reason: 'tool_succeeded', requestedAtMs: command.requestedAtMs + 1 } } as const;
      for (const table of ['trace_anchors', 'audit_receipts', 'tool_execution_start_barriers'] as const) {
        await without(table, 'start_id = ?', [command.startId], async (what) => {
          await expectCorrupt(`${what}: CompleteStepRun`, a().runs.handle(complete));
          expect(await store.damage.rows('events', 'stream_id = ?', [`run-${s.runId}`])).to.have.length(sequence + 1);
        });
      }
      await expectHealthy();
    });

    it('R9.3, R11.2 a driver claim on a start whose evidence is damaged (a fact row gone) is CORRUPT_RECORD, never a generation to act on; its history likewise', async () => {
      const claims = a().driverClaims();
      try {
        for (const table of ['trace_anchors', 'audit_receipts'] as const) {
          await without(table, 'start_id = ?', [command.startId], async (what) => {
            await expectCorrupt(`${what}: claim`, claims.claim(command.startId, 'driver-damage', 60_000));
            await expectCorrupt(`${what}: history`, claims.history(command.startId));
          });
        }
        expect(await claims.history(command.startId)).to.deep.equal([]);
      } finally {
        await claims.close();
      }
      await expectHealthy();
    });

    if (backend.chained) it("R9.2, R9.3 an outcome event changed in place (decidedBy rewritten, its outcome row to match, the chain not recomputed): outcome and history are CORRUPT_RECORD, never the rewritten decision", async () => {
      const stream = `run-${f.runId}`;
      const [event] = await store.damage.rows('events', 'stream_id = ? AND event_type = ?', [stream, 'StepRunCompleted']);
      expect(event, 'the outcome event').to.not.equal(undefined);
      const forged = String(event!.data_json).replace('"decidedBy":"damage-suite"', '"decidedBy":"mallory"');
      expect(forged).to.not.equal(event!.data_json);
      await withCells(
        [
          ['events', 'stream_id = ? AND event_type = ?', [stream, 'StepRunCompleted'], 'data_json', () => forged],
          ['start_outcomes', 'start_id = ?', [finished.startId], 'decided_by', () => 'mallory'],
        ],
        async () => {
          await expectCorrupt('outcome', a().recovery.outcome(finished.startId));
          await expectCorrupt('history', a().recovery.history(f.runId, f.stepRunId));
        },
      );
      await expectHealthy();
    });

    it("R9.3 a start in doubt whose barrier and StepRun rows are both gone: its Run's in-doubt list raises CORRUPT_RECORD (the Run's log started it), never an empty list (CLI exit 5)", async () => {
      const rows = [
        ...(await store.damage.rows('tool_execution_start_barriers', 'start_id = ?', [command.startId])).map((r) => ['tool_execution_start_barriers', r] as const),
        ...(await store.damage.rows('step_runs', 'run_id = ? AND step_run_id = ?', [s.runId, s.stepRunId])).map((r) => ['step_runs', r] as const),
      ];
      expect(rows).to.have.length(2);
      const gone = [];
      for (const [table, row] of rows) gone.push(await store.damage.remove(table, String(row._key)));
      try {
        await expectCorrupt('inDoubt({ runId })', a().recovery.inDoubt({ runId: s.runId }));
        await expectCliExit5('barrier and StepRun rows deleted', [['in-doubt', '--run', s.runId]]);
      } finally {
        for (const g of gone.reverse()) await g.undo();
      }
      await expectHealthy();
    });

    it("R9.3 a fact's row and its replay-index row both gone: a lookup of its id is CORRUPT_RECORD (the Run's log holds the fact's event), never null", async () => {
      for (const [identity, table, column] of [
        ['traceId', 'trace_anchors', 'trace_id'],
        ['auditReceiptId', 'audit_receipts', 'audit_receipt_id'],
      ] as const) {
        const value = identity === 'traceId' ? finished.evidence.traceId : finished.evidence.auditReceiptId;
        const rows = [
          ...(await store.damage.rows(table, `${column} = ?`, [value])).map((r) => [table, r] as const),
          ...(await indexRows('identity = ? AND value = ?', [identity, value])),
        ];
        expect(rows, identity).to.have.length(indexed ? 2 : 1);
        const gone = [];
        for (const [t, row] of rows) gone.push(await store.damage.remove(t, String(row._key)));
        try {
          await expectCorrupt(`lookup('${identity}')`, a().recovery.lookup(identity, value));
        } finally {
          for (const g of gone.reverse()) await g.undo();
        }
      }
      expect(await a().recovery.lookup('traceId', 'trace-never-used')).to.equal(null);
      await expectHealthy();
    });

    if (indexed) it("R4.3, R9.3 an index row changed to a new command's value is CORRUPT_RECORD for that command, never drift its barrier does not hold; drift the barrier holds stays SEMANTIC_CONFLICT", async () => {
      const values = replayValuesOf(replayKeysOf(unstarted));
      for (const identity of REPLAY_IDENTITIES) {
        const [row] = await store.damage.rows('start_replay_identities', 'identity = ? AND start_id = ?', [identity, command.startId]);
        const changed = await store.damage.set('start_replay_identities', String(row!._key), 'value', values[identity]);
        expect(changed.applied, `${identity}: ${changed.reason ?? ''}`).to.equal(true);
        try {
          await expectCorrupt(`${identity} index row changed to the new command's value: prepare`, a().barriers.prepare(unstarted));
        } finally {
          await store.damage.set('start_replay_identities', changed.key, 'value', row!.value);
        }
      }
      const reused = { ...unstarted, evidence: { ...unstarted.evidence, traceId: command.evidence.traceId } };
      expect(await rejects(a().barriers.prepare(reused))).to.be.instanceOf(SemanticConflictError);
      await expectHealthy();
    });

    if (backend.chained) it("R9.3 a stream whose heads disagree with its log fails readStream closed, never a shorter or an empty stream: a head's version moved, both moved back by one, a head row gone, or the log and stream row gone with the Run and StepRun heads kept", async () => {
      const stream = `run-${f.runId}`;
      const plus = (v: unknown) => Number(v) + 1;
      const minus = (v: unknown) => Number(v) - 1;
      const read = (what: string) => () => expectCorrupt(what, a().runs.readStream(f.runId));
      await withCells([['runs', 'run_id = ?', [f.runId], 'version', plus]], read('Run head version + 1'));
      await withCells([['streams', 'stream_id = ?', [stream], 'version', plus]], read('stream head version + 1'));
      await withCells([['streams', 'stream_id = ?', [stream], 'version', minus], ['runs', 'run_id = ?', [f.runId], 'version', minus]], read('both heads - 1'));
      await without('runs', 'run_id = ?', [f.runId], (what) => expectCorrupt(what, a().runs.readStream(f.runId)));
      await without('streams', 'stream_id = ?', [stream], (what) => expectCorrupt(what, a().runs.readStream(f.runId)));
      const log = [...(await store.damage.rows('events', 'stream_id = ?', [stream])), ...(await store.damage.rows('streams', 'stream_id = ?', [stream]))];
      const gone = [];
      for (const row of log) gone.push(await store.damage.remove('stream_id' in row && 'stream_position' in row ? 'events' : 'streams', String(row._key)));
      try {
        await expectCorrupt('log and stream row deleted', a().runs.readStream(f.runId));
        const runs = await store.damage.rows('runs', 'run_id = ?', [f.runId]);
        const headGone = await store.damage.remove('runs', String(runs[0]!._key));
        try {
          await expectCorrupt('log, stream and Run head deleted, StepRun head kept', a().runs.readStream(f.runId));
        } finally {
          await headGone.undo();
        }
      } finally {
        for (const g of gone.reverse()) await g.undo();
      }
      expect(await a().runs.readStream('never-created')).to.deep.equal([]);
      await expectHealthy();
    });

    if (backend.chained) it("R9.3 both Run heads set back together over an intact log (by one event, or by a start's four facts): outcome, show, history, note, purge-note, resolve and in-doubt fail closed, never an answer from heads behind their log (CLI exit 5)", async () => {
      const back = (runId: string, by: number) =>
        [
          ['streams', 'stream_id = ?', [`run-${runId}`], 'version', (v: unknown) => Number(v) - by],
          ['runs', 'run_id = ?', [runId], 'version', (v: unknown) => Number(v) - by],
        ] as const;
      for (const by of [1, 4]) {
        await withCells(back(f.runId, by), async () => {
          const what = `finished Run, both heads - ${by}`;
          await expectCorrupt(`${what}: outcome`, a().recovery.outcome(finished.startId));
          await expectCorrupt(`${what}: history`, a().recovery.history(f.runId, f.stepRunId));
          await expectCorrupt(`${what}: note`, a().recovery.note(finished.startId));
          await expectCorrupt(`${what}: purge-note`, a().recovery.purgeNote(finished.startId));
          await expectCorrupt(`${what}: resolve (the outcome it has)`, a().recovery.resolve(finished.startId, 'completed', { decidedBy: 'damage-suite', reason: 'tool_succeeded' }));
          await expectCliExit5(what, [['show', '--start-id', finished.startId], ['history', f.runId, f.stepRunId]]);
        });
        await withCells(back(s.runId, by), async () => {
          const what = `Run in doubt, both heads - ${by}`;
          await expectCorrupt(`${what}: outcome`, a().recovery.outcome(command.startId));
          await expectCorrupt(`${what}: in-doubt of the Run`, a().recovery.inDoubt({ runId: s.runId }));
          await expectCorrupt(`${what}: in-doubt of the store`, a().recovery.inDoubt());
          await expectCliExit5(what, [['show', '--start-id', command.startId], ['in-doubt']]);
        });
      }
      await expectHealthy();
    });

    it('R9.3 an outcome row under a start id no barrier holds: outcome, lookup, note, purge-note and resolve of that id raise CORRUPT_RECORD, never start_not_found or null (CLI exit 5)', async () => {
      const [row] = await store.damage.rows('start_outcomes', 'start_id = ?', [finished.startId]);
      const cells = Object.fromEntries(Object.entries(row!).filter(([c]) => c !== '_key'));
      const id = 'start-stray-outcome';
      const stray = await store.damage.insert('start_outcomes', { ...cells, start_id: id, step_run_version: 99, event_id: 'evt-stray-outcome' });
      try {
        await expectCorrupt('stray outcome: outcome', a().recovery.outcome(id));
        await expectCorrupt('stray outcome: lookup', a().recovery.lookup('startId', id));
        await expectCorrupt('stray outcome: note', a().recovery.note(id));
        await expectCorrupt('stray outcome: purge-note', a().recovery.purgeNote(id));
        await expectCorrupt('stray outcome: resolve', a().recovery.resolve(id, 'completed', { decidedBy: 'damage-suite', reason: 'tool_succeeded' }));
        await expectCliExit5('stray outcome', [['show', '--start-id', id], ['note', id]]);
      } finally {
        await stray.undo();
      }
      expect(await a().recovery.lookup('startId', 'start-never-made')).to.equal(null);
      await expectHealthy();
    });

    // A change that still parses and decodes (a time moved by one millisecond) is caught by the
    // chain alone: the read that returns the event must fail, not only `verify` (R9.2, R9.3).
    if (backend.chained) it('R9.2 a cell of any event changed to another valid value (a time, a chain digest) fails readStream closed', async () => {
      const laterMs = (json: unknown) => String(json).replace(/("occurredAtMs":)(\d+)/, (_m, k: string, n: string) => `${k}${Number(n) + 1}`);
      const cells: [string, (v: unknown) => unknown][] = [
        ['data_json', laterMs],
        ['committed_at_ms', (v) => Number(v) + 1],
        ['chain_digest', (v) => `sha256:${'0'.repeat(64)}${String(v)}`.slice(0, 71)],
      ];
      for (let position = 1; position <= sequence + 1; position++) {
        const [row] = await store.damage.rows('events', 'stream_id = ? AND stream_position = ?', [`run-${s.runId}`, position]);
        let key = String(row!._key);
        for (const [column, to] of cells) {
          const damaged = to(row![column]);
          if (damaged === row![column]) continue; // an event without occurredAtMs
          const set = await store.damage.set('events', key, column, damaged);
          expect(set.applied, `events@${position}.${column}: ${set.reason ?? ''}`).to.equal(true);
          key = set.key;
          try {
            await expectCorrupt(`events@${position}.${column}: readStream`, a().runs.readStream(s.runId));
          } finally {
            const back = await store.damage.set('events', key, column, row![column]);
            expect(back.applied).to.equal(true);
            key = back.key;
          }
        }
      }
      await expectHealthy();
    });
  });
};
