import { expect } from 'chai';
import { CorruptRecordError, SemanticConflictError, type LifecycleCommand, type StepRunState } from '../../domain';
import type { Scenario } from '../../domain/scenario';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { stepRunRowOf, type StepRunRow } from '../../projections/rows';
import { rejects } from '../../testkit/rejects';
import type { DamageSession } from '../../testkit/damage';
import { setUp } from './startBarrierConformance';

// R9.1 / R9.3 on every backend: a StepRun head row is a projection of the Run's log. Someone
// who may write the store's rows (SQLite: the file, its triggers dropped and put back after;
// PostgreSQL: the owner, triggers off for one transaction) rewrites a head into a state the log
// never reached, with a digest that matches it (the head's digest is a plain hash). The store
// itself refuses the next start and the next lifecycle move decided on that head, and writes
// nothing; getStepRun fails closed; with the head put back, the store reads and verifies clean.

export interface HeadForgeryStore {
  readonly authority: RecoverableStartBarrierAuthority;
  /** Writes the head row as given, past every guard a writer of the store meets, and puts the guards back. */
  rewriteHead(row: StepRunRow): Promise<void>;
  /** Moves a Run's head and its stream head by `delta` the same way (not in memory, whose stream heads no damage session reaches). */
  readonly moveRunHeads?: (runId: string, delta: number) => Promise<void>;
  /** Sets one cell of a Run's head row (its snapshot, its Project) past every guard; the function returned puts it back. */
  rewriteRunCell(runId: string, column: 'snapshot_id' | 'snapshot_digest' | 'project_id', value: string): Promise<() => Promise<void>>;
  /** Deletes a StepRun's head row past every guard; the function returned puts it back. */
  removeHead(runId: string, stepRunId: string): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export interface HeadForgeryBackend {
  readonly name: string;
  /** Whether its stores can move a Run's heads (`moveRunHeads`). */
  readonly runHeads: boolean;
  open(): Promise<HeadForgeryStore>;
}

/** A head rewrite through a damage session (memory: its tables; PostgreSQL: the owner, triggers off for each change). */
export const rewriteThrough = (damage: DamageSession) => async (row: StepRunRow): Promise<void> => {
  const [found] = await damage.rows('step_runs', 'run_id = ? AND step_run_id = ?', [row.run_id, row.step_run_id]);
  let key = String(found!._key);
  for (const column of ['status', 'version', 'digest', 'state_json'] as const) {
    const set = await damage.set('step_runs', key, column, row[column]);
    expect(set.applied, `step_runs.${column}: ${set.reason ?? ''}`).to.equal(true);
    key = set.key;
  }
};

/** One cell of a Run head rewritten through a damage session, and put back by the function returned. */
export const rewriteRunThrough = (damage: DamageSession) => async (runId: string, column: string, value: string): Promise<() => Promise<void>> => {
  const [row] = await damage.rows('runs', 'run_id = ?', [runId]);
  const set = await damage.set('runs', String(row!._key), column, value);
  expect(set.applied, `runs.${column}: ${set.reason ?? ''}`).to.equal(true);
  return async () => void (await damage.set('runs', set.key, column, row![column]));
};

/** A head row deleted through a damage session, and put back by the function returned. */
export const removeThrough = (damage: DamageSession) => async (runId: string, stepRunId: string): Promise<() => Promise<void>> => {
  const [found] = await damage.rows('step_runs', 'run_id = ? AND step_run_id = ?', [runId, stepRunId]);
  const { undo } = await damage.remove('step_runs', String(found!._key));
  return undo;
};

const complete = (s: Scenario): LifecycleCommand => ({
  type: 'CompleteStepRun',
  data: { runId: s.runId, stepRunId: s.stepRunId, decidedBy: 'head-forgery-suite', reason: 'tool_succeeded', requestedAtMs: 1_780_000_100_000 },
});

/** The Run head and stream head moved through a damage session (PostgreSQL: the owner, triggers off for each change). */
export const moveRunHeadsThrough = (damage: DamageSession) => async (runId: string, delta: number): Promise<void> => {
  for (const [table, where, key] of [['runs', 'run_id = ?', runId], ['streams', 'stream_id = ?', `run-${runId}`]] as const) {
    const [row] = await damage.rows(table, where, [key]);
    const set = await damage.set(table, String(row!._key), 'version', Number(row!.version) + delta);
    expect(set.applied, `${table}.version: ${set.reason ?? ''}`).to.equal(true);
  }
};

export const headForgerySuite = (backend: HeadForgeryBackend): void => {
  describe(`R9.1 a StepRun head rewritten from outside, digest and all: the log decides (${backend.name})`, function () {
    this.timeout(120_000);
    let store: HeadForgeryStore;
    let f: Scenario;
    let honest: StepRunState;

    const a = () => store.authority;
    const stateOf = async (s: Scenario): Promise<StepRunState> => {
      const { digest: _digest, ...state } = (await a().runs.getStepRun(s.runId, s.stepRunId))!;
      return state;
    };
    const expectCorrupt = async (what: string, p: Promise<unknown>): Promise<CorruptRecordError> => {
      const e = await rejects(p);
      expect(e instanceof CorruptRecordError, `${what}: ${e.message}`).to.equal(true);
      return e as CorruptRecordError;
    };

    /** Rewrites the finished StepRun's head to `forged`, runs `body`, and checks nothing was written. */
    const withForgedHead = async (forged: StepRunState, body: () => Promise<void>): Promise<void> => {
      const events = (await a().runs.readStream(f.runId)).length;
      await store.rewriteHead(stepRunRowOf(forged));
      try {
        await expectCorrupt('getStepRun', a().runs.getStepRun(f.runId, f.stepRunId));
        await body();
      } finally {
        await store.rewriteHead(stepRunRowOf(honest));
      }
      expect((await a().runs.readStream(f.runId)).length, 'events of the Run').to.equal(events);
      expect(await stateOf(f)).to.deep.equal(honest);
    };

    before(async () => {
      store = await backend.open();
      f = await setUp(a());
      const first = f.startCommand();
      await a().barriers.prepare(first);
      await a().recovery.resolve(first.startId, 'completed', { decidedBy: 'head-forgery-suite', reason: 'tool_succeeded' });
      honest = await stateOf(f);
      expect(honest.status).to.equal('completed');
    });
    after(async () => store?.close());

    it('R9.1 a completed StepRun made ready at its own version: a second start is refused (CORRUPT_RECORD) and leaves no barrier', async () => {
      const forged: StepRunState = { ...honest, status: 'ready' };
      await withForgedHead(forged, async () => {
        const again = f.startCommand(forged, 'forged-again');
        const e = await expectCorrupt('prepare', a().barriers.prepare(again));
        expect(e.message).to.match(/log/);
        expect(await a().barriers.getByStartId(again.startId)).to.equal(null);
      });
    });

    it("R9.1 R9.3 a StepRun head whose tool definition or approval is rewritten (digest recomputed, status and version kept): getStepRun and a start built from that head are refused (CORRUPT_RECORD), never answered or committed for content the log never had", async () => {
      const g = await setUp(a(), { withApproval: true });
      const state = await stateOf(g);
      expect(state.status).to.equal('waiting_approval');
      const other = `sha256:${'e'.repeat(64)}`;
      const forgeries: [string, StepRunState, (c: ReturnType<Scenario['startCommand']>) => ReturnType<Scenario['startCommand']>][] = [
        ['tool definition', { ...state, toolDefinition: { id: 'tool.forged', digest: other } }, (c) => ({ ...c, toolDefinition: { id: 'tool.forged', digest: other } })],
        ['approval', { ...state, approval: { ...state.approval!, approvalDigest: other } }, (c) => c],
      ];
      const events = (await a().runs.readStream(g.runId)).length;
      for (const [what, forged, shape] of forgeries) {
        await store.rewriteHead(stepRunRowOf(forged));
        try {
          const e = await expectCorrupt(`${what}: getStepRun`, a().runs.getStepRun(g.runId, g.stepRunId));
          expect(e.message).to.include(what === 'approval' ? 'approval' : 'toolDefinition');
          const cmd = shape(g.startCommand(forged, `forged-${what.replace(' ', '-')}`));
          await expectCorrupt(`${what}: prepare`, a().barriers.prepare(cmd));
          expect(await a().barriers.getByStartId(cmd.startId)).to.equal(null);
        } finally {
          await store.rewriteHead(stepRunRowOf(state));
        }
      }
      expect((await a().runs.readStream(g.runId)).length, 'events of the Run').to.equal(events);
      expect((await a().barriers.prepare(g.startCommand(state))).outcome).to.equal('created');
    });

    it("R9.1 a Run head whose snapshot or Project is rewritten: a start naming the rewritten values is refused (CORRUPT_RECORD), never committed for what the Run's log never made", async () => {
      const g = await setUp(a());
      const honestStart = g.startCommand();
      const events = (await a().runs.readStream(g.runId)).length;
      for (const [column, value, shape] of [
        ['snapshot_id', 'snapshot-forged', (c: typeof honestStart) => ({ ...c, project: { ...c.project, snapshotId: 'snapshot-forged' } })],
        ['snapshot_digest', `sha256:${'e'.repeat(64)}`, (c: typeof honestStart) => ({ ...c, project: { ...c.project, snapshotDigest: `sha256:${'e'.repeat(64)}` } })],
      ] as const) {
        const putBack = await store.rewriteRunCell(g.runId, column, value);
        try {
          const forged = shape(g.startCommand(undefined, `forged-${column.replace('_', '-')}`));
          await expectCorrupt(`${column}: prepare`, a().barriers.prepare(forged));
          expect(await a().barriers.getByStartId(forged.startId)).to.equal(null);
        } finally {
          await putBack();
        }
      }
      expect((await a().runs.readStream(g.runId)).length, 'events of the Run').to.equal(events);
      expect((await a().barriers.prepare(honestStart)).outcome).to.equal('created');
    });

    it('R9.1 a completed StepRun set back to ready at an earlier version: the start names an attempt the replay index holds and is refused (R4.3)', async () => {
      const { lastStartId: _last, ...before } = honest;
      const forged: StepRunState = { ...before, status: 'ready', version: honest.version - 2 };
      await withForgedHead(forged, async () => {
        const again = f.startCommand(forged, 'forged-back');
        const e = await rejects(a().barriers.prepare(again));
        expect(e instanceof SemanticConflictError && e.identity === 'attempt', e.message).to.equal(true);
        expect(await a().barriers.getByStartId(again.startId)).to.equal(null);
      });
    });

    it('R9.1 a completed StepRun set back to running: completing it again repeats a StepRun version its log has and is refused', async () => {
      await withForgedHead({ ...honest, status: 'running', version: honest.version - 1 }, async () => {
        const e = await expectCorrupt('CompleteStepRun', a().runs.handle(complete(f)));
        // refused by the outcome's own check (the head is not where the StepRun's log ends) or by the log's index and triggers
        expect(e.message).to.match(/version its log has|follows the last event|does not follow its last event|its log ends in/);
      });
    });

    it('R9.1 a completed StepRun made lost: making it ready again (a lifecycle move) is refused', async () => {
      await withForgedHead({ ...honest, status: 'lost' }, async () => {
        await expectCorrupt('MarkStepRunReady', a().runs.handle({ type: 'MarkStepRunReady', data: { runId: f.runId, stepRunId: f.stepRunId, requestedAtMs: 1_780_000_100_000 } }));
      });
    });

    if (backend.runHeads) it('R9.1 a Run whose two heads were set back or forward together: its next start is refused (CORRUPT_RECORD), never retried as a lost race, and writes nothing', async () => {
      for (const delta of [-1, 1]) {
        const g = await setUp(a());
        const events = (await a().runs.readStream(g.runId)).length;
        await store.moveRunHeads!(g.runId, delta);
        try {
          await expectCorrupt(`prepare with heads moved by ${delta}`, a().barriers.prepare(g.startCommand()));
        } finally {
          await store.moveRunHeads!(g.runId, -delta);
        }
        expect((await a().runs.readStream(g.runId)).length).to.equal(events);
        expect(await a().barriers.getByStartId(g.startCommand().startId)).to.equal(null);
      }
    });

    it('R9.3 a StepRun head row deleted while its log creates it: a start, a lifecycle move and creating it again are refused (CORRUPT_RECORD, never step_run_not_found) and write nothing; put back, the store verifies clean', async () => {
      const g = await setUp(a());
      const events = (await a().runs.readStream(g.runId)).length;
      const create = g.lifecycle.find((c) => c.type === 'CreateStepRun')!;
      const putBack = await store.removeHead(g.runId, g.stepRunId);
      try {
        await expectCorrupt('getStepRun', a().runs.getStepRun(g.runId, g.stepRunId));
        const e = await expectCorrupt('prepare', a().barriers.prepare(g.startCommand()));
        expect(e.message).to.match(/log creates this StepRun/);
        await expectCorrupt('MarkStepRunReady', a().runs.handle({ type: 'MarkStepRunReady', data: { runId: g.runId, stepRunId: g.stepRunId, requestedAtMs: 1_780_000_100_000 } }));
        await expectCorrupt('CreateStepRun again', a().runs.handle(create));
      } finally {
        await putBack();
      }
      expect((await a().runs.readStream(g.runId)).length, 'events of the Run').to.equal(events);
      expect(await a().barriers.getByStartId(g.startCommand().startId)).to.equal(null);
      expect((await a().barriers.prepare(g.startCommand())).outcome).to.equal('created');
      expect((await a().recovery.verify()).problems).to.deep.equal([]);
    });

    it('R9.3 a head set past its log (a version no event reached): getStepRun fails closed; put back, the store verifies clean', async () => {
      await withForgedHead({ ...honest, version: honest.version + 1 }, async () => {
        const again = f.startCommand({ ...honest, status: 'ready', version: honest.version + 1 }, 'forged-past');
        await rejects(a().barriers.prepare(again));
        expect(await a().barriers.getByStartId(again.startId)).to.equal(null);
      });
      expect((await a().recovery.verify()).problems).to.deep.equal([]);
    });
  });
};
