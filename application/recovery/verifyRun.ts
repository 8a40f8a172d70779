import { CorruptRecordError, isStartBarrierError } from '../../domain';
import type { VerifyProblem } from '../../domain/records';
import { LogDerivation } from '../checks/logDerivation';
import type { EvidenceKeyring } from '../evidenceKeys';
import { createVerifyProgress, type VerifyProgress, type VerifyProgressListener } from '../verifyProgress';
import type { RecoveryBackend, RecoveryCounts, RecoveryView, VerifySession } from './view';

// One run of `recovery.verify`: what its walks found, and what they saw of the store, kept for
// the comparisons with the log that follow them (verifyRecords.ts, verifyLog.ts).

/** Rows per page of a walk. */
export const PAGE = 200;

/** A record's damage as verify reports it; anything that is not damage (the store unavailable) is thrown on. */
export const problemOf = (kind: VerifyProblem['kind'], record: string, e: unknown): VerifyProblem => {
  if (e instanceof CorruptRecordError) return { kind, record, problem: e.message };
  if (isStartBarrierError(e)) return { kind, record, problem: `${e.code}: ${e.message}` };
  throw e;
};

export class VerifyRun {
  readonly problems: VerifyProblem[] = [];
  /** What is not damage but wants an operator; never fails verify. */
  readonly warnings: VerifyProblem[] = [];
  /** Walks a damaged store cut short (a row its page cannot decode, a table gone). */
  readonly cutShort = new Set<string>();
  readonly checked = { barriers: 0, outcomes: 0, runs: 0, stepRuns: 0, events: 0 };
  readonly notes = { present: 0, purged: 0 };
  readonly seals = { sealed: 0, legacy: 0 };
  /** `startId NUL noteDigest` of every note an outcome event binds. */
  readonly boundNotes = new Set<string>();
  // What is stored, kept to compare with what the log derives (R9.2), after the event pass.
  readonly storedBarriers = new Set<string>();
  readonly storedOutcomeEvents = new Set<string>();
  // Only keys are kept: each stream's stored heads are read when its fold ends.
  readonly storedRuns = new Set<string>();
  /** `run/step` -> run id of every StepRun row not yet derived by a stream. */
  readonly storedStepRuns = new Map<string, string>();
  readonly log = new LogDerivation();
  readonly keys: EvidenceKeyring | undefined;

  /** Set once the store is counted (open): until then nothing is reported. */
  progress: VerifyProgress = { tick: () => undefined, integrity: () => undefined };

  private constructor(
    readonly backend: RecoveryBackend,
    private readonly session: VerifySession,
  ) {
    this.keys = backend.keyring?.();
  }

  /** A run in `session`, its progress weighted by the store's counts (a store that cannot count them is reported damaged, and walked still). */
  static async open(backend: RecoveryBackend, session: VerifySession, onProgress: VerifyProgressListener | undefined): Promise<VerifyRun> {
    const run = new VerifyRun(backend, session);
    let counts: RecoveryCounts = { barriers: 0, outcomes: 0, runs: 0, stepRuns: 0, events: 0 };
    await run.walk('schema', 'counts', async () => void (counts = await run.snapshot((v) => v.counts())));
    run.progress = createVerifyProgress(counts, onProgress);
    return run;
  }

  /** One read in the snapshot the whole run holds: every walk sees the same state of the store. */
  snapshot<T>(body: (view: RecoveryView) => Promise<T>): Promise<T> {
    return this.session.read(body);
  }

  /** The notes as of that snapshot. */
  get noteReads(): VerifySession['notes'] {
    return this.session.notes;
  }

  /**
   * One walk of the store. Damage that stops it (CorruptRecordError: the backends map a
   * missing table or an unreadable page to it) is reported, and verify goes on with the next
   * walk: it never throws for damage. Anything else (the store unavailable) still throws.
   */
  async walk(kind: VerifyProblem['kind'], what: string, body: () => Promise<void>): Promise<void> {
    try {
      await body();
    } catch (e) {
      if (!(e instanceof CorruptRecordError)) throw e;
      this.cutShort.add(what);
      this.problems.push({ kind, record: what, problem: `the walk of ${what} stopped on damage, so what follows it was not checked: ${e.message}` });
    }
  }

  /** Whether the event walk and these walks reached their end: a walk cut short would list what it never read. */
  whole(...walks: string[]): boolean {
    return !this.cutShort.has('events') && walks.every((w) => !this.cutShort.has(w));
  }
}
