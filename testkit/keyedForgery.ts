import { CorruptRecordError } from '../domain';
import { buildScenario, type Scenario } from '../domain/scenario';
import type { EvidenceKeyringOptions } from '../application/evidenceKeys';
import type { RecoverableStartBarrierAuthority } from '../application/authority';
import { openPostgresStartBarrier } from '../infrastructure/postgres';
import { openSqliteStartBarrier } from '../infrastructure/sqlite';
import { tallyOf, type ForgeryTally, type Judgement } from './forgery';
import type { BackendName } from './rawSql';

// R9.4 forgeries against a store with a deployment keyring: the forger holds the runtime's
// credentials (PostgreSQL: ql3_runtime, migrate: false; SQLite: another process on the file)
// but not the key, and appends a legal lifecycle or outcome event for a running StepRun. The
// database's history checks accept it (it is a legal transition), so it is never `refused`:
// it must be `detected`, by every keyed read that shows it failing closed and by `verify`, and
// no keyed write may build on it (a start of a StepRun made ready that way is refused).

export interface KeyedForgeryTarget {
  readonly backend: BackendName;
  /** The product with the deployment keyring. */
  readonly keyed: RecoverableStartBarrierAuthority;
  /** The same store with the runtime's rights and no key. */
  readonly forger: RecoverableStartBarrierAuthority;
}

export interface OpenKeyedTarget {
  readonly target: KeyedForgeryTarget;
  close(): Promise<void>;
}

/** Fixed test key material: the forgery is about not holding it. */
export const FORGERY_KEYRING: EvidenceKeyringOptions = { active: { id: 'deployment-1', secret: Buffer.alloc(32, 0x6b) } };

export const openKeyedForgeryTarget = async (backend: BackendName, target: string): Promise<OpenKeyedTarget> => {
  const keyed =
    backend === 'sqlite'
      ? await openSqliteStartBarrier({ path: target, evidenceKeys: FORGERY_KEYRING })
      : await openPostgresStartBarrier({ connectionString: target, evidenceKeys: FORGERY_KEYRING });
  const forger =
    backend === 'sqlite'
      ? await openSqliteStartBarrier({ path: target })
      : await openPostgresStartBarrier({ connectionString: target, poolConfig: { options: '-c role=ql3_runtime' }, migrate: false });
  return { target: { backend, keyed, forger }, close: async () => void (await Promise.all([keyed.close(), forger.close()])) };
};

const running = async (a: RecoverableStartBarrierAuthority): Promise<{ s: Scenario; startId: string }> => {
  const s = buildScenario();
  for (const c of s.lifecycle) await a.runs.handle(c);
  const r = await a.barriers.prepare(s.startCommand());
  return { s, startId: r.barrier.record.startId };
};

const outcomeCommand = (type: 'CompleteStepRun' | 'FailStepRun', s: Scenario) => {
  const base = { runId: s.runId, stepRunId: s.stepRunId, decidedBy: 'orchestrator', requestedAtMs: 2 };
  return type === 'CompleteStepRun' ? { type, data: { ...base, reason: 'tool_succeeded' as const } } : { type, data: { ...base, reason: 'tool_failed' as const } };
};

/** Refused by the store, or detected: every keyed read that shows it fails closed and verify reports it. */
const judge = async (target: KeyedForgeryTarget, t: { s: Scenario; startId: string }, forge: () => Promise<unknown>): Promise<Judgement> => {
  try {
    await forge();
  } catch (e) {
    return { outcome: 'refused', reason: e instanceof Error ? e.message : String(e) };
  }
  const reads: [string, () => Promise<unknown>][] = [
    ['readStream', () => target.keyed.runs.readStream(t.s.runId)],
    ['recovery.outcome', () => target.keyed.recovery.outcome(t.startId)],
    ['recovery.history', () => target.keyed.recovery.history(t.s.runId, t.s.stepRunId)],
    ['recovery.inDoubt of its Run', () => target.keyed.recovery.inDoubt({ runId: t.s.runId })],
  ];
  const accepted: string[] = [];
  for (const [name, read] of reads) if (!((await read().then(() => undefined, (e: unknown) => e)) instanceof CorruptRecordError)) accepted.push(name);
  const prefix = t.s.runId.slice('run-'.length);
  const found = (await target.keyed.recovery.verify()).problems.filter((p) => p.kind === 'event_seal' && p.record.includes(prefix));
  if (found.length === 0) accepted.push('verify');
  return accepted.length > 0
    ? { outcome: 'accepted', reason: `read without the seal by ${accepted.join(', ')}` }
    : { outcome: 'detected', reason: found.map((p) => `${p.kind} ${p.record}: ${p.problem}`).join(' | ') };
};

export const KEYED_FORGERIES: readonly { readonly name: string; attempt(target: KeyedForgeryTarget): Promise<Judgement> }[] = [
  {
    name: 'keyed: a legal StepRunCompleted for a running StepRun, appended without the key',
    attempt: async (target) => {
      const t = await running(target.keyed);
      return judge(target, t, () => target.forger.runs.handle(outcomeCommand('CompleteStepRun', t.s)));
    },
  },
  {
    name: 'keyed: a legal StepRunFailed for a running StepRun, appended without the key',
    attempt: async (target) => {
      const t = await running(target.keyed);
      return judge(target, t, () => target.forger.runs.handle(outcomeCommand('FailStepRun', t.s)));
    },
  },
  {
    name: 'keyed: an operator resolution (outcome event) of an in-doubt start, appended without the key',
    attempt: async (target) => {
      const t = await running(target.keyed);
      return judge(target, t, () => target.forger.recovery.resolve(t.startId, 'completed', { decidedBy: 'intruder', reason: 'checked_tool_log', requestedAtMs: 5 }));
    },
  },
  {
    name: 'keyed: a StepRun made ready without the key, then started by the runtime with it',
    attempt: async (target) => {
      const s = buildScenario();
      const ready = s.lifecycle[s.lifecycle.length - 1]!;
      for (const c of s.lifecycle.slice(0, -1)) await target.keyed.runs.handle(c);
      try {
        await target.forger.runs.handle(ready);
      } catch (e) {
        return { outcome: 'refused', reason: e instanceof Error ? e.message : String(e) };
      }
      // The database accepts a legal transition; the keyed start must not be decided on it.
      const start = await target.keyed.barriers.prepare(s.startCommand()).then(
        (r) => `a start was ${r.outcome} on it`,
        (e: unknown) => (e instanceof CorruptRecordError ? undefined : `the start failed otherwise: ${e instanceof Error ? e.message : String(e)}`),
      );
      if (start !== undefined) return { outcome: 'accepted', reason: start };
      if ((await target.forger.barriers.getByStartId(s.startCommand().startId)) !== null) return { outcome: 'accepted', reason: 'the refused start left a barrier' };
      const found = (await target.keyed.recovery.verify()).problems.filter((p) => p.kind === 'event_seal' && p.record.startsWith(`run-${s.runId}@`));
      return found.length === 0
        ? { outcome: 'accepted', reason: 'verify did not report the unsealed event' }
        : { outcome: 'detected', reason: `the keyed start refused (CORRUPT_RECORD); ${found.map((p) => `${p.kind} ${p.record}: ${p.problem}`).join(' | ')}` };
    },
  },
];

/** Every keyed forgery against one target, in order, as the same tally as the unkeyed ones. */
export const tryKeyedForgeries = async (target: KeyedForgeryTarget): Promise<ForgeryTally> => {
  const outcomes: ({ name: string } & Judgement)[] = [];
  for (const f of KEYED_FORGERIES) outcomes.push({ name: f.name, ...(await f.attempt(target)) });
  return tallyOf(outcomes);
};
