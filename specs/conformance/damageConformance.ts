import { expect } from 'chai';
import { CorruptRecordError, REPLAY_IDENTITIES, SemanticConflictError, type ToolExecutionStartCommand } from '../../domain';
import type { Scenario } from '../../domain/scenario';
import type { StartBarrierAuthority } from '../../application/authority';
import { mutateCell, type DamageSession } from '../../testkit/damage';
import { rejects } from '../../testkit/rejects';
import { setUp } from './startBarrierConformance';

// R5.3 on every SQL backend from one source: the owner (triggers and foreign keys off) damages
// one stored cell at a time through the shared damage session; every read fails closed with
// CorruptRecordError, never a best guess, and a replayed prepare never answers from damaged
// rows. Each cell is put back before the next one, and the store reads healthy again after.

export interface DamageStore {
  /** Reads the store the damage session writes. */
  readonly authority: StartBarrierAuthority;
  readonly damage: DamageSession;
  close(): Promise<void>;
}

export interface DamageBackend {
  readonly name: string;
  /**
   * Whether a damaged key may make a barrier unreachable from one entry point (the read then
   * answers null there and CorruptRecordError from another). PostgreSQL's barrier read also
   * probes the replay index, so it never answers null for a start the index knows.
   */
  readonly damagedKeyMayReadAbsent: boolean;
  /** `table.column` cells the schema itself refuses to damage even with triggers off (CHECK). */
  readonly guarded: readonly string[];
  /** A fresh store; `seed` writes into it before the damage session opens. */
  open(seed: (authority: StartBarrierAuthority) => Promise<void>): Promise<DamageStore>;
}

/** The barrier row and the four fact rows of a start, each with the column that names the start. */
const START_TABLES = ['tool_execution_start_barriers', 'security_audit_events', 'trace_anchors', 'audit_receipts', 'step_run_mutations'] as const;
const EVENT_COLUMNS = ['stream_id', 'stream_position', 'event_id', 'event_type', 'data_json', 'committed_at_ms'] as const;

export const damageSuite = (backend: DamageBackend): void => {
  describe(`damaged records fail closed (R5.3): ${backend.name}`, function () {
    this.timeout(180_000);
    let store: DamageStore;
    let s: Scenario;
    let command: ToolExecutionStartCommand;
    let version: number;
    let sequence: number;

    before(async () => {
      store = await backend.open(async (a) => {
        s = await setUp(a, { withApproval: true });
        command = s.startCommand();
        const { record } = (await a.barriers.prepare(command)).barrier;
        version = record.attempt.startedStepRunVersion;
        sequence = record.runEvent.runEventSequence;
        await a.barriers.prepare(command); // a second, untouched read path
      });
    });
    after(async () => {
      await store?.close();
    });

    const a = () => store.authority;
    const outcome = (p: Promise<unknown>) => p.then((v) => v, (e: unknown) => e);

    /** Every read must fail closed; a replayed prepare must fail typed, never answer from damage. */
    const expectFailsClosed = async (what: string, mayReadAbsent: boolean): Promise<void> => {
      const reads = [await outcome(a().barriers.getByStartId(command.startId)), await outcome(a().barriers.getByStepRunAttempt(s.runId, s.stepRunId, version))];
      expect(reads.some((r) => r instanceof CorruptRecordError), `${what}: ${String(reads)}`).to.equal(true);
      for (const r of reads) expect(r instanceof CorruptRecordError || (mayReadAbsent && r === null), `${what}: ${String(r)}`).to.equal(true);
      const replay = await rejects(a().barriers.prepare(command));
      // a damaged digest in the index reads as a different command bound to that identity (R4.3)
      expect(replay instanceof CorruptRecordError || replay instanceof SemanticConflictError, `${what}: prepare ${replay.message}`).to.equal(true);
    };

    const expectHealthy = async (): Promise<void> => {
      expect((await a().barriers.getByStartId(command.startId))?.record.startId).to.equal(command.startId);
      expect((await a().barriers.getByStepRunAttempt(s.runId, s.stepRunId, version))?.record.startId).to.equal(command.startId);
      expect((await a().barriers.prepare(command)).outcome).to.equal('existing');
    };

    /** Change every cell of one row alone, check every read, put it back. Returns the cells the schema refused. */
    const sweep = async (table: string, where: string, params: readonly unknown[], columns: readonly string[] | undefined, mayReadAbsent: boolean, to: (value: unknown, column: string) => unknown = mutateCell) => {
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
          await expectFailsClosed(`${table}.${column}`, mayReadAbsent);
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
        const r = await sweep(table, 'start_id = ?', [command.startId], undefined, backend.damagedKeyMayReadAbsent);
        swept += r.swept;
        refused.push(...r.refused);
      }
      expect(swept).to.equal(19 + 7 + 8 + 7 + 15); // every column of the five tables
      expect(refused).to.deep.equal(backend.guarded);
      await expectHealthy();
    });

    it('R5.3 every cell of the five event rows of the start, changed alone, is detected', async () => {
      for (let position = sequence - 3; position <= sequence + 1; position++) {
        const r = await sweep('events', 'stream_id = ? AND stream_position = ?', [`run-${s.runId}`, position], EVENT_COLUMNS, false);
        expect(r.refused, `event @${position}`).to.deep.equal([]);
      }
      await expectHealthy();
    });

    it('R5.3 every cell of the seven replay-identity rows, changed alone, is detected', async () => {
      // identity has a CHECK constraint on both backends: move it to another identity's name
      const rotate = (value: unknown, column: string) =>
        column === 'identity' ? REPLAY_IDENTITIES[(REPLAY_IDENTITIES.indexOf(value as never) + 1) % REPLAY_IDENTITIES.length] : mutateCell(value);
      for (const identity of REPLAY_IDENTITIES) {
        const r = await sweep('start_replay_identities', 'start_id = ? AND identity = ?', [command.startId, identity], undefined, backend.damagedKeyMayReadAbsent, rotate);
        expect(r.swept, identity).to.equal(4);
        expect(r.refused, identity).to.deep.equal([]);
      }
      await expectHealthy();
    });

    it('R5.3 an identity bound to several rows (unique index dropped, row duplicated or claimed by another start) fails closed', async () => {
      for (const identity of REPLAY_IDENTITIES) {
        for (const claimedBy of [undefined, 'some-other-start']) {
          const what = `${identity} -> ${claimedBy ?? 'same start'}`;
          const [row] = await store.damage.rows('start_replay_identities', 'start_id = ? AND identity = ?', [command.startId, identity]);
          const dup = await store.damage.duplicateIdentity(String(row!._key), claimedBy);
          try {
            const read = await rejects(a().barriers.getByStartId(command.startId));
            expect(read, `${what}: ${read.message}`).to.be.instanceOf(CorruptRecordError);
            const byAttempt = await rejects(a().barriers.getByStepRunAttempt(s.runId, s.stepRunId, version));
            expect(byAttempt, `${what}: ${byAttempt.message}`).to.be.instanceOf(CorruptRecordError);
            if (identity === 'attempt') expect(byAttempt.message).to.match(/bound to 2 barriers/);
            const replay = await rejects(a().barriers.prepare(command));
            expect(replay, `${what}: ${replay.message}`).to.be.instanceOf(CorruptRecordError);
          } finally {
            await dup.undo();
          }
        }
      }
      await expectHealthy();
    });
  });
};
