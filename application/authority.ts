import type { CompactReport, DriverClaims, LifecycleCommandInput, ToolExecutionStartCommand, StartAttemptContext, LookupValue, ReplayIdentity, ResolveOptions, StartOutcomeKind } from '../domain';
import type { EventStore, EventStoreSessionFactory, ReadEventMetadataWithGlobalPosition } from '@event-driven-io/emmett';
import type {
  AppendOutcome,
  AttemptHistoryEntry,
  InDoubtStart,
  PrepareResult,
  ResolutionNote,
  ResolveResult,
  StartOutcome,
  StepRunView,
  StoredBarrier,
  StoredEvent,
  VerifyReport,
} from '../domain/records';
import { START_WRITE_STEPS } from './startWritePlan';
import type { PlanStatus } from './invocationPlans';
import type { VerifyProgressListener } from './verifyProgress';

// The surface every backend offers (in-memory for specs, SQLite, PostgreSQL). The shared
// conformance suite in `specs/conformance/` drives it unchanged against each.

// The records it answers with live in the domain (domain/records.ts); named here too, for
// callers that import them from this module.
export type * from '../domain/records';

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
   * The saga's driver claims (R11.2), kept beside this authority's records (SQLite or
   * PostgreSQL). Each call opens what it needs; `close()` them when done.
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
