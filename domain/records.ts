import type { StartBarrierRecord } from './barrier';
import type { Ref } from './codecs';
import type { ExecutionClass } from './command';
import type { RunStreamEvent } from './events';
import type { StartOutcomeKind } from './recovery';
import type { StepRunState } from './state';

// The records the store keeps and every backend answers with: a barrier as stored, an event as
// logged, an outcome fact, a verify report. Plain data the layers above share (projections
// derive them, application returns them, infrastructure reads them back); no behaviour.

/** A barrier as stored: the immutable record, its digest, and the database's commit clock. */
export interface StoredBarrier {
  readonly record: StartBarrierRecord;
  readonly barrierDigest: string;
  /** The transaction clock of the database that committed it (R3.10), never the caller's time. */
  readonly committedAtMs: number;
}

export interface PrepareResult {
  readonly outcome: 'created' | 'existing';
  readonly barrier: StoredBarrier;
}

export interface StepRunView extends StepRunState {
  readonly digest: string;
}

export interface StoredEvent {
  readonly eventId: string;
  readonly streamPosition: number;
  readonly globalPosition: number;
  readonly committedAtMs: number;
  readonly event: RunStreamEvent;
}

export interface AppendOutcome {
  readonly runVersion: number;
  readonly events: readonly StoredEvent[];
}

/** The outcome fact of one start, as projected into the recovery read model. */
export interface StartOutcome {
  readonly startId: string;
  readonly runId: string;
  readonly stepRunId: string;
  readonly outcome: StartOutcomeKind;
  readonly decidedBy: string;
  /** A code of OUTCOME_REASON_CODES; stores from before R10.2 may hold legacy text here. */
  readonly reason: string;
  /** R10.2: the operator's ticket (`OPS-1234`) and the digest of the note in the side record. */
  readonly ticket?: string;
  readonly noteDigest?: string;
  readonly outcomeDigest?: string;
  /** The StepRun version the outcome moved the StepRun to (the attempt's version + 1). */
  readonly stepRunVersion: number;
  /** The outcome event in `run-<runId>`. */
  readonly eventId: string;
  readonly streamPosition: number;
  /** The decider's business time. */
  readonly requestedAtMs: number;
  /** The database clock of the transaction that appended it (R3.10). */
  readonly committedAtMs: number;
}

/** A committed start with no outcome fact yet: its adapter may or may not have acted. */
export interface InDoubtStart {
  readonly startId: string;
  readonly projectId: string;
  readonly runId: string;
  readonly stepRunId: string;
  /** The StepRun version the start moved it to (R4.4's attempt). */
  readonly attempt: number;
  readonly adapter: Ref;
  readonly executionClass: ExecutionClass;
  readonly timeoutMs: number;
  readonly traceId: string;
  readonly spanId: string;
  readonly requestedAtMs: number;
  readonly committedAtMs: number;
  /** Database clock now minus `committedAtMs`. */
  readonly ageMs: number;
  readonly barrierDigest: string;
}

export interface AttemptHistoryEntry {
  readonly attempt: number;
  readonly barrier: StoredBarrier;
  /** null: in doubt. */
  readonly outcome: StartOutcome | null;
}

export interface ResolveResult {
  /** `recorded`: this call appended the outcome; `existing`: the same outcome was recorded before. */
  readonly status: 'recorded' | 'existing';
  readonly outcome: StartOutcome;
}

export type VerifyProblemKind =
  | 'barrier'
  | 'outcome'
  | 'run'
  | 'step_run'
  | 'event'
  /** An event row's chain link does not bind it to its predecessor (R9.2). */
  | 'chain'
  /** A stream, Run or StepRun head, or a read model row, is not what the log derives (R9.2). */
  | 'head'
  | 'stream_head'
  | 'foreign_key'
  | 'duplicate_identity'
  /** A replay-index row naming a barrier that does not hold its value (R4.1). */
  | 'stray_identity'
  | 'duplicate_attempt'
  | 'evidence_without_move'
  | 'mutation_without_barrier'
  | 'running_without_barrier'
  | 'in_doubt_mismatch'
  | 'note'
  /** With a keyring: an event not covered by a valid seal of the deployment key, or a seal that does not verify (R9.4). */
  | 'event_seal'
  /** The migration ledger or the capability rows are not what this code's migrations wrote. */
  | 'schema'
  /** The driver claim history is not one `claim` and `release` can write (R11.2). */
  | 'driver_claim'
  /** A sealed invocation plan that does not open as what its barrier binds (R12.2). */
  | 'plan'
  /** A compaction record that does not match its digest, an identity it does not bind, or a Run compacted only in part (R14.2). */
  | 'compaction'
  /** A warning, never a problem: a note with text that no outcome binds (R10.2). */
  | 'orphan_note';

export interface VerifyProblem {
  readonly kind: VerifyProblemKind;
  /** Which record: a start id, `run/step`, `stream@position`, `table rowid`. */
  readonly record: string;
  readonly problem: string;
}

export interface VerifyReport {
  readonly ok: boolean;
  readonly checked: { readonly barriers: number; readonly outcomes: number; readonly runs: number; readonly stepRuns: number; readonly events: number };
  /** Resolution notes (R10.2): `purged` ones keep their digest bound, so they never fail verify. */
  readonly notes: { readonly present: number; readonly purged: number };
  /**
   * With a keyring only (R9.4): events covered by a valid seal, and legacy events (written before
   * the first keyed writer's seal origin), which read without a seal and never fail verify.
   */
  readonly seals?: { readonly sealed: number; readonly legacy: number };
  /** Sealed invocation plans (R12.2): shredded ones (or under a destroyed key) never fail verify. */
  readonly plans?: { readonly sealed: number; readonly shredded: number };
  readonly problems: readonly VerifyProblem[];
  /** What is not damage but wants an operator (an orphan note still holding text); never fails verify. */
  readonly warnings: readonly VerifyProblem[];
}

/** A person's note on an outcome (R10.2): the evidence binds its digest; the text can be purged. */
export type ResolutionNote =
  | { readonly startId: string; readonly noteDigest: string; readonly status: 'present'; readonly text: string }
  | { readonly startId: string; readonly noteDigest: string; readonly status: 'purged'; readonly purgedAtMs: number };
