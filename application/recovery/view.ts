import type { AttemptKey, ReplayIdentity } from '../../domain';
import type { EventRow } from '../../domain/eventRows';
import type { AppendOutcome, VerifyProblem, StoredBarrier } from '../../domain/records';
import type { RunRow, StepRunRow } from '../../projections/rows';
import type { StartOutcomeRow } from '../../projections/outcomeRows';
import type { StreamHeads } from '../checks/readChecks';
import type { LoggedEventRow } from '../checks/logDerivation';
import type { SealedSpan } from '../eventSeals';
import type { EvidenceKeyring } from '../evidenceKeys';
import type { InvocationPlans } from '../invocationPlans';

// What a backend offers the recovery rules: reads inside one snapshot (SQLite: a deferred
// transaction on its one connection; PostgreSQL: a REPEATABLE READ read-only transaction;
// memory: the current tables), its note store and its lifecycle handler. Rows come back raw;
// the rules (this folder) verify them, so the backends cannot drift.

export interface InDoubtFilter {
  readonly projectId?: string;
  readonly runId?: string;
  /** Only barriers with committed_at_ms <= this (database clock). */
  readonly committedAtOrBeforeMs?: number;
  /** The first this many, in listing order (oldest first). */
  readonly limit?: number;
}

export interface RecoveryCounts {
  readonly barriers: number;
  readonly outcomes: number;
  readonly runs: number;
  readonly stepRuns: number;
  readonly events: number;
}

/** Reads one backend offers inside one snapshot. Rows come back raw; this module verifies them. */
export interface RecoveryView {
  /** The database clock (R3.10), in ms. */
  nowMs(): Promise<number>;
  /** Start ids of barriers with no outcome row, oldest commit first. */
  inDoubtStartIds(filter: InDoubtFilter): Promise<readonly string[]>;
  /**
   * Run ids of the barriers in the filter's scope that have an outcome row: the Runs whose
   * outcomes take starts off the in-doubt list (R9.4 checks their seals).
   */
  resolvedRunIds(filter: Omit<InDoubtFilter, 'limit'>): Promise<readonly string[]>;
  /** Start ids of every barrier of one StepRun, in attempt order. */
  attemptStartIds(runId: string, stepRunId: string): Promise<readonly string[]>;
  /** The StepRunStarted event rows of one Run's stream, in stream order: the log's own count of each StepRun's attempts. */
  stepRunStartedRows(runId: string): Promise<readonly EventRow[]>;
  /** The Run's StepRunCreated events, in stream order (read only where a StepRun has no head row). */
  stepRunCreatedRows(runId: string): Promise<readonly EventRow[]>;
  /**
   * Every start id the value is bound to, by the replay index *or* by the barrier's mirror
   * column, with repeats (a duplicate row is damage the caller must see).
   */
  identityStartIds(identity: ReplayIdentity, key: string, attempt: AttemptKey | undefined): Promise<readonly string[]>;
  /** The R5.3-verified barrier, or null. */
  readBarrier(startId: string): Promise<StoredBarrier | null>;
  outcomeRows(startId: string): Promise<readonly StartOutcomeRow[]>;
  /** An event by id; a store that keeps the chain (R9.2) also gives its link and its predecessor's (`previous_chain`, null when missing). */
  eventById(eventId: string): Promise<(EventRow & { readonly chain_digest?: string | null; readonly previous_chain?: string | null }) | undefined>;
  stepRunRow(runId: string, stepRunId: string): Promise<StepRunRow | undefined>;
  /** The heads of one Run (its stream, Run and StepRun heads, its barriers) and where its log ends. */
  runHeads(runId: string): Promise<StreamHeads>;
  /** Every StepRun row with status `running`, of one Project and/or Run when given; the first `limit` (by Run, StepRun) when given. */
  runningStepRuns(filter: Pick<InDoubtFilter, 'projectId' | 'runId' | 'limit'>): Promise<readonly StepRunRow[]>;
  /**
   * The in-doubt index (a projection the database keeps beside the barrier and outcome rows):
   * the first `limit` rows in listing order, each filter off when undefined. Its cost is the
   * rows it returns, whatever the number in doubt; rows come back raw, checked by the caller.
   */
  inDoubtIndexPage(filter: InDoubtFilter & { readonly limit: number }): Promise<readonly InDoubtIndexRow[]>;
  /** The in-doubt index by start id, after `after`: what `verify` compares with the log. */
  inDoubtIndexRowsAfter(after: string, limit: number): Promise<readonly InDoubtIndexRow[]>;
  // --- verify: counts, keyset pages, and the checks only the backend's SQL can do cheaply ---
  counts(): Promise<RecoveryCounts>;
  barrierIdsAfter(after: string, limit: number): Promise<readonly string[]>;
  outcomeRowsAfter(after: string, limit: number): Promise<readonly StartOutcomeRow[]>;
  runRowsAfter(after: string, limit: number): Promise<readonly (RunRow & { stream_version: number | string | null })[]>;
  stepRunRowsAfter(after: readonly [string, string], limit: number): Promise<readonly StepRunRow[]>;
  /**
   * The log in stream order, after (stream, position): each stream's events come together, so
   * `verify` holds one stream's fold at a time, not every Run's state at once.
   */
  eventRowsByStreamAfter(after: readonly [string, number], limit: number): Promise<readonly (LoggedEventRow & { global_position: number | string })[]>;
  /** The stored heads of one Run: its row (with its stream's version) and every StepRun row. */
  headsOfRun(runId: string): Promise<{ readonly run: (RunRow & { stream_version: number | string | null }) | undefined; readonly stepRuns: readonly StepRunRow[] }>;
  /** Foreign keys, duplicates, orphaned evidence and mutations, stream heads. */
  integrityProblems(): Promise<readonly VerifyProblem[]>;
  /** Keyed evidence (R9.4): the seal origins, the seals overlapping from..to of one stream, and the events they span. */
  sealedSpan(streamId: string, from: number, to: number): Promise<SealedSpan>;
}

/** A row of the in-doubt index: a start with no outcome, as its barrier holds it. */
export interface InDoubtIndexRow {
  readonly start_id: string;
  readonly project_id: string;
  readonly run_id: string;
  readonly committed_at_ms: number | string;
}

/** A resolution note as stored (R10.2): text until purged, then NULL with the purge time. */
export interface NoteRow {
  readonly start_id: string;
  readonly note_digest: string;
  readonly note_text: string | null;
  readonly purged_at_ms: number | string | null;
  /** R9.2: binds the purge time; NULL while the note holds text. */
  readonly purge_digest: string | null;
}

/** The redactable side record of notes. Not evidence: its only change is a purge. */
export interface NoteStore {
  /** Insert the note, or nothing when this exact (start, digest) is already there. */
  put(startId: string, noteDigest: string, text: string): Promise<void>;
  /** Set the note's text to NULL, stamped with the database clock. */
  purge(startId: string, noteDigest: string): Promise<void>;
  rows(startId: string): Promise<readonly NoteRow[]>;
  /** Every note, in (start, digest) order: there is one per resolved start at most. */
  all(): Promise<readonly NoteRow[]>;
}

/** Reads inside the one snapshot `verify` holds: the recovery view, and the notes as of it. */
export interface VerifySession {
  read<T>(body: (view: RecoveryView) => Promise<T>): Promise<T>;
  readonly notes: Pick<NoteStore, 'rows' | 'all'>;
}

export interface RecoveryBackend {
  /** Resolution notes (R10.2). */
  readonly notes: NoteStore;
  /** Run `body` against one consistent snapshot. */
  snapshot<T>(body: (view: RecoveryView) => Promise<T>): Promise<T>;
  /**
   * `verify`'s reads: `body` runs with one snapshot held for all of them, so its walks, and
   * the comparisons between them, see one state of the store while writers go on. A read that
   * fails on damage leaves the snapshot usable for the next walk, and a backend that refuses
   * its reads on a damaged schema reads it here, to report the damage. Inside `body`, read
   * only through the session (the SQLite authority is busy with it until it ends).
   */
  verifySession<T>(body: (session: VerifySession) => Promise<T>): Promise<T>;
  /** The authority's lifecycle handler (`runs.handle`): resolutions are lifecycle events. */
  handle(command: unknown): Promise<AppendOutcome>;
  /** Business time for a resolution that names none (never the commit time). */
  clock?: () => number;
  /** The deployment keyring (R9.4), if any: outcome events must then be sealed, and `verify` checks every seal. */
  keyring?: () => EvidenceKeyring | undefined;
  /** Sealed invocation plans (R12.2): `verify` counts them, sealed or shredded, and reports one that does not open. */
  plans?: () => InvocationPlans;
}
