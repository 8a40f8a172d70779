import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { expect } from 'chai';
import { buildScenario } from '../../domain/scenario';
import { START_STEPS, type RecoverableStartBarrierAuthority, type StartBarrierAuthority } from '../../application/authority';
import { attemptIdsOf } from '../../domain';
import { checkStore, describeProblems } from '../../testkit/invariants';
import type { RawSql } from '../../testkit/rawSql';
import { nodeArgsOf, spawnTsxWorker } from '../../testkit/workerProcess';
import { planOf } from '../saga/sagaConformance';

// R3.9 with a real crash, on every SQL backend from one source: a process is SIGKILLed inside
// the start transaction after each step (in each write mode the backend has). The database
// rolls the transaction back when the process is gone, so the StepRun is still `ready`, no row
// of the start exists in any table, and replaying the same command (the caller never got an
// answer) creates the start exactly once.

export interface CrashStore {
  /** What the worker opens: a file path or a connection string. */
  readonly target: string;
  readonly authority: StartBarrierAuthority;
  /** Rows naming this start in the evidence, mutation and replay-index tables, read raw. */
  startRows(startId: string): Promise<number>;
  /** A privileged raw connection to the same store (the caller closes it). */
  raw(): Promise<RawSql>;
  /** A new authority on the same store, as a restarted process opens it (the caller closes it). */
  reopen(): Promise<StartBarrierAuthority>;
  close(): Promise<void>;
}

export interface CrashBackend {
  readonly name: string;
  readonly backend: 'sqlite' | 'postgres';
  /** The write modes to crash in (PostgreSQL: batched and stepwise). */
  readonly modes: readonly string[];
  /** Several workers at once (the server keeps them apart) or one after another (one file). */
  readonly parallel: boolean;
  open(): Promise<CrashStore>;
}

const WORKER = join(__dirname, 'crashWorker.ts');
const START_WORKER = join(__dirname, 'startWorker.ts');
const SAGA_WORKER = join(__dirname, 'sagaCrashWorker.ts');

/** A worker process, run to its end: how it ended and what it printed. */
const runWorker = ([script, ...args]: readonly [string, ...string[]]) =>
  new Promise<{ signal: NodeJS.Signals | null; code: number | null; out: string }>((resolve) => {
    const p = spawn(process.execPath, [...nodeArgsOf(script), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (out += d.toString()));
    p.on('exit', (code, signal) => resolve({ signal, code, out }));
  });

/** The evidence and mutation rows of one start (`t` spells a table for the dialect). */
export const START_ROWS_SQL = (t: (table: string) => string, param: string): string =>
  `SELECT (SELECT count(*) FROM ${t('security_audit_events')} WHERE start_id = ${param}) + (SELECT count(*) FROM ${t('trace_anchors')} WHERE start_id = ${param})
        + (SELECT count(*) FROM ${t('audit_receipts')} WHERE start_id = ${param}) + (SELECT count(*) FROM ${t('step_run_mutations')} WHERE start_id = ${param}) AS n`;

export const crashSuite = (backend: CrashBackend): void => {
  describe(`crash inside the start transaction (R3.9): ${backend.name}`, function () {
    this.timeout(180_000);
    let store: CrashStore;
    before(async () => {
      store = await backend.open();
    });
    after(async () => {
      await store?.close();
    });

    it(`R3.9 SIGKILL after each step${backend.modes.length > 1 ? `, ${backend.modes.join(' and ')}` : ''}: the start is absent, then a replay creates it once`, async () => {
      const a = store.authority;
      const cases = backend.modes.flatMap((mode) => START_STEPS.map((step) => ({ mode, step, scenario: buildScenario() })));
      for (const c of cases) for (const l of c.scenario.lifecycle) await a.runs.handle(l);
      const crash = (c: (typeof cases)[number]) => runWorker([WORKER, backend.backend, store.target, JSON.stringify(c.scenario.startCommand()), c.step, c.mode]);
      const runs = [];
      if (backend.parallel) runs.push(...(await Promise.all(cases.map(crash))));
      else for (const c of cases) runs.push(await crash(c));
      for (const [i, r] of runs.entries()) expect(r.signal, `${cases[i]!.mode}/${cases[i]!.step}: ${r.out}`).to.equal('SIGKILL');

      for (const c of cases) {
        const s = c.scenario;
        const command = s.startCommand();
        const where = `${c.mode}/${c.step}`;
        expect((await a.runs.getStepRun(s.runId, s.stepRunId))?.status, where).to.equal('ready');
        expect((await a.runs.readStream(s.runId)).length, where).to.equal(3);
        expect(await a.barriers.getByStartId(command.startId), where).to.equal(null);
        expect(await store.startRows(command.startId), where).to.equal(0);
        const replay = await a.barriers.prepare(command);
        expect(replay.outcome, where).to.equal('created');
        expect((await a.barriers.prepare(command)).outcome, where).to.equal('existing');
      }
    });

    it(`R3.9 R12.2 a saga drive SIGKILLed inside its start transaction after each step${backend.modes.length > 1 ? ` (${backend.modes.join(' and ')})` : ''} leaves neither barrier nor sealed plan; killed once the start committed, both are there`, async () => {
      const a = store.authority as RecoverableStartBarrierAuthority;
      const steps = [...START_STEPS, 'adapter'] as const;
      const cases = backend.modes.flatMap((mode) => steps.map((step) => ({ mode, step, scenario: buildScenario() })));
      for (const c of cases) for (const l of c.scenario.lifecycle) await a.runs.handle(l);
      const crash = (c: (typeof cases)[number]) => {
        const s = c.scenario;
        const command = s.startCommand();
        const trigger = { kind: 'ready', runId: s.runId, stepRunId: s.stepRunId, stepRunVersion: 2, requestedAtMs: 1_790_000_000_000 };
        return runWorker([SAGA_WORKER, backend.backend, store.target, JSON.stringify(trigger), JSON.stringify(planOf(command)), c.step, c.mode]);
      };
      const runs = [];
      if (backend.parallel) runs.push(...(await Promise.all(cases.map(crash))));
      else for (const c of cases) runs.push(await crash(c));
      for (const [i, r] of runs.entries()) expect(r.signal, `${cases[i]!.mode}/${cases[i]!.step}: ${r.out}`).to.equal('SIGKILL');
      for (const c of cases) {
        const where = `${c.mode}/${c.step}`;
        const { startId } = attemptIdsOf(c.scenario.runId, c.scenario.stepRunId, 3);
        const committed = c.step === 'adapter';
        expect((await a.barriers.getByStartId(startId)) !== null, `${where}: barrier`).to.equal(committed);
        expect((await a.plans.status(startId)).status, `${where}: plan`).to.equal(committed ? 'sealed' : 'absent');
      }
    });

    /**
     * Every stored start verifies and is whole (the reliability harness's store check: fact
     * counts, no evidence without its StepRun move, no running StepRun without its barrier,
     * foreign keys, integrity), and every acknowledged start is there.
     */
    const assertWholeOrAbsent = async (a: StartBarrierAuthority, acknowledged: readonly string[]): Promise<number> => {
      const raw = await store.raw();
      try {
        const check = await checkStore(raw, a.barriers, { acknowledged: new Map(acknowledged.map((id) => [id, undefined])), full: true });
        expect(check.problems, describeProblems(check.problems)).to.deep.equal([]);
        expect(check.found).to.equal(acknowledged.length);
        return check.stored;
      } finally {
        await raw.close();
      }
    };

    it('R3.9 SIGKILL inside the start transaction, 20 times at varied steps: reopening shows every start whole or absent', async () => {
      const already = await assertWholeOrAbsent(store.authority, []);
      let acknowledged: string[] = [];
      for (let i = 0; i < 20; i++) {
        const step = START_STEPS[i % START_STEPS.length]!;
        const worker = spawnTsxWorker(START_WORKER, [backend.backend, store.target], { KILL_AT_STEP: step, KILL_AT_START: String(i % 4), STARTS: '50' });
        const { code, signal } = await worker.exited;
        if (signal === null && code !== 0) throw new Error(`worker failed (${code}): ${worker.stderr()}`);
        expect(signal, `kill ${i} at ${step}`).to.equal('SIGKILL');
        const acks = worker.lines.filter((l) => l.startsWith('ACK ')).map((l) => l.split(' ')[2]!);
        expect(acks).to.have.length(i % 4);
        acknowledged = [...acknowledged, ...acks];
        const a = await store.reopen();
        try {
          const stored = await assertWholeOrAbsent(a, acknowledged);
          expect(stored).to.equal(already + acknowledged.length); // the killed start never committed
        } finally {
          await a.close();
        }
      }
    });
  });
};

const COMPACTION_WORKER = join(__dirname, 'compactionCrashWorker.ts');

export interface CompactionCrashBackend {
  readonly name: string;
  /** The steps a compaction passes (each a point the worker dies after). */
  readonly steps: readonly string[];
  /** A fresh store: its target for the worker and the runtime authority that sets it up. */
  open(): Promise<{ readonly target: string; readonly authority: StartBarrierAuthority & Pick<RecoverableStartBarrierAuthority, 'recovery'> }>;
  /** The store reopened after the crash, as the operator's retention path opens it. */
  reopen(target: string): Promise<{ readonly authority: RecoverableStartBarrierAuthority; compact(): Promise<unknown>; close(): Promise<void> }>;
}

/**
 * R14.2 with a real crash: a compaction SIGKILLed after each of its steps leaves every Run whole
 * (its start reads back, replays `existing`) or compacted (its start reads absent, replays
 * START_COMPACTED), never half; `verify` is green; a compaction run again finishes the job.
 */
export const compactionCrashSuite = (backend: CompactionCrashBackend): void => {
  describe(`crash inside compaction (R14.2): ${backend.name}`, function () {
    this.timeout(600_000);
    it('R14.2 SIGKILL after each compaction step: each Run is whole or compacted, verify is green, and compaction then finishes', async () => {
      for (const step of backend.steps) {
        const { target, authority: a } = await backend.open();
        const commands = [];
        for (let i = 0; i < 2; i += 1) {
          const s = buildScenario();
          for (const l of s.lifecycle) await a.runs.handle(l);
          const c = s.startCommand();
          await a.barriers.prepare(c);
          await a.recovery.resolve(c.startId, 'completed', { decidedBy: 'crash-suite', reason: 'tool_succeeded' });
          commands.push(c);
        }
        await a.close();
        const r = await new Promise<{ signal: NodeJS.Signals | null; out: string }>((resolve) => {
          const p = spawn(process.execPath, [...nodeArgsOf(COMPACTION_WORKER), target, step], { stdio: ['ignore', 'pipe', 'pipe'] });
          let out = '';
          p.stdout.on('data', (d: Buffer) => (out += d.toString()));
          p.stderr.on('data', (d: Buffer) => (out += d.toString()));
          p.on('exit', (_code, signal) => resolve({ signal, out }));
        });
        expect(r.signal, `${step}: ${r.out}`).to.equal('SIGKILL');
        const after = await backend.reopen(target);
        for (const c of commands) {
          const barrier = await after.authority.barriers.getByStartId(c.startId);
          const replay = await after.authority.barriers.prepare(c).then((v) => v.outcome, (e: unknown) => (e as { code?: string }).code);
          expect(replay, `${step} ${c.startId}`).to.equal(barrier === null ? 'START_COMPACTED' : 'existing');
          // inside a Run's transaction the kill rolls it back: every Run is whole
          if (step !== 'vacuum') expect(barrier, `${step}: the Run is whole`).to.not.equal(null);
        }
        const v = await after.authority.recovery.verify();
        expect(v.problems, `${step}: ${JSON.stringify(v.problems)}`).to.deep.equal([]);
        await after.compact();
        for (const c of commands) expect(await after.authority.barriers.getByStartId(c.startId), `${step}: compacted at last`).to.equal(null);
        expect((await after.authority.recovery.verify()).ok, step).to.equal(true);
        await after.close();
      }
    });
  });
};
