import type { CompactReport, DriverClaims } from '../domain';
import type { EventStore, EventStoreSessionFactory, ReadEventMetadataWithGlobalPosition } from '@event-driven-io/emmett';
import type {
  ExecutionClass,
  LifecycleCommandInput,
  ToolExecutionStartCommand,
  StartAttemptContext,
  LookupValue,
  Ref,
  ReplayIdentity,
  ResolveOptions,
  RunStreamEvent,
  StartBarrierRecord,
  StartOutcomeKind,
  StepRunState,
} from '../domain';
import { START_WRITE_STEPS } from './startWrite';
import type { PlanStatus } from './invocationPlans';
import type { VerifyProgressListener } from './verifyProgress';

// The surface every backend offers (in-memory for specs, SQLite, PostgreSQL). The shared
// conformance suite in `specs/conformance/` drives it unchanged against each.

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

export interface RunsApi {
  /**
   * Decide and append one lifecycle command (`{ type, data }`, strictly decoded at run time
   * too). Typed, so a misspelled `type` or field fails to compile; emmett's `command()` output
   * is accepted (its `kind` and `metadata` are ignored).
   */
  handle(command: LifecycleCommandInput): Promise<AppendOutcome>;
  getStepRun(runId: string, stepRunId: string): Promise<StepRunView | null>;
  /** Every event of `run-<runId>`, decoded and in order. */
  readStream(runId: string): Promise<readonly StoredEvent[]>;
}

export interface BarriersApi {
  /** R3: one transaction, fixed order; `existing` on an exact replay (R4.2). */
  /**
   * `context.w3cTraceId`: the trace this attempt runs in, recorded on a new start's trace anchor
   * and never compared (a replay answers with the anchor as stored). `withTelemetry` passes the
   * active OpenTelemetry context's.
   */
  prepare(command: ToolExecutionStartCommand, context?: StartAttemptContext): Promise<PrepareResult>;
  getByStartId(startId: string): Promise<StoredBarrier | null>;
  getByStepRunAttempt(runId: string, stepRunId: string, startedStepRunVersion: number): Promise<StoredBarrier | null>;
}

/** The points of the start transaction (R3.1 .. R3.7, then just before commit). */
export const START_STEPS = ['lookup', 'lock', ...START_WRITE_STEPS, 'beforeCommit'] as const;
export type StartStep = (typeof START_STEPS)[number];

/**
 * Called inside the start transaction after each step. Throwing aborts the transaction: the
 * fault-injection specs use it to prove R3.9; production leaves it unset.
 */
export type StartStepHook = (step: StartStep) => void | Promise<void>;

export interface StartBarrierAuthority {
  readonly backend: 'memory' | 'sqlite' | 'postgres';
  readonly runs: RunsApi;
  readonly barriers: BarriersApi;
  close(): Promise<void>;
}

// ------------------------------------------------------------------ recovery

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

export interface InDoubtQuery {
  readonly projectId?: string;
  readonly runId?: string;
  /** Only starts committed at least this long ago, by the database clock. */
  readonly olderThanMs?: number;
  /**
   * At most this many, the oldest first (1 .. 10,000; default: all). After a crash storm a
   * large store can hold many; each one listed is a verified read.
   */
  readonly limit?: number;
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

export interface VerifyOptions {
  /**
   * Called as records are checked, with the phase (the CLI draws its progress bar from it).
   * `done` / `total` are weighted by each phase's cost, so they advance at an even pace.
   */
  readonly onProgress?: VerifyProgressListener;
}

/**
 * Recovery read models and operator resolutions. Every read re-verifies what it returns (R5.3)
 * and fails closed; a resolution is a new lifecycle event, never an edit.
 */
export interface RecoveryApi {
  /** Every barrier whose StepRun has no outcome fact yet, oldest first. */
  inDoubt(query?: InDoubtQuery): Promise<readonly InDoubtStart[]>;
  /** Every barrier of every version of one StepRun, in attempt order, with its outcome. */
  history(runId: string, stepRunId: string): Promise<readonly AttemptHistoryEntry[]>;
  /** The one barrier an R4.1 identity names, or null; several is corruption (fails closed). */
  lookup(identity: ReplayIdentity, value: LookupValue): Promise<StoredBarrier | null>;
  /** The outcome fact of a start, or null while it is in doubt. */
  outcome(startId: string): Promise<StartOutcome | null>;
  /** The note its outcome binds (R10.2), or null when the outcome has none. */
  note(startId: string): Promise<ResolutionNote | null>;
  /** Erase the note's text for good; its digest stays bound and `verify` stays green (R10.2). */
  purgeNote(startId: string): Promise<ResolutionNote>;
  /** Append the lifecycle outcome event for an in-doubt start (`lost` then allows `ready`). */
  resolve(startId: string, outcome: StartOutcomeKind, options: ResolveOptions): Promise<ResolveResult>;
  /** Re-verify every stored record; never throws for damage, reports every bad record. */
  verify(options?: VerifyOptions): Promise<VerifyReport>;
}

/** An authority with the recovery surface (memory and SQLite; PostgreSQL through its subpath). */
export interface RecoverableStartBarrierAuthority extends StartBarrierAuthority {
  readonly recovery: RecoveryApi;
  /**
   * The saga's driver claims (R11.2), kept beside this authority's records (SQLite 0060,
   * PostgreSQL pg-0034). Each call opens what it needs; `close()` them when done.
   */
  driverClaims(): DriverClaims;
  /** Sealed invocation plans (R12.2): what operators see of a tool input, and shredding. */
  readonly plans: PlansApi;
}

/**
 * R14.2 retention, for the operator (never the runtime): compact every Run whose StepRuns are all
 * completed or failed, with no attempt in doubt and no live driver claim, whose last event was
 * committed before `before` (ISO 8601 date or epoch ms). docs/retention.md says what is kept.
 */
export interface RetentionApi {
  compact(options: { readonly before: string | number }): Promise<CompactReport>;
}

/** The operator's side of sealed invocation plans; no key is needed for either. */
export interface PlansApi {
  /** The redacted preview (only the fields its redaction contract names) and whether the plan is sealed or shredded. */
  status(startId: string): Promise<PlanStatus>;
  /** Erase the plan's sealed bytes and key id for good: it never opens again; `verify` stays green and counts it shredded. */
  shred(startId: string): Promise<boolean>;
}

/** emmett's event store over the Run streams, with a transactional session (`withSession`). */
export type RunEventStore = EventStore<ReadEventMetadataWithGlobalPosition> & EventStoreSessionFactory<EventStore<ReadEventMetadataWithGlobalPosition>>;
