import { createVerifyProgress, type VerifyProgressListener } from './verifyProgress';
import type { InvocationPlans } from './invocationPlans';
import * as t from 'io-ts';
import {
  CorruptRecordError,
  PreconditionError,
  SemanticConflictError,
  ValidationError,
  type ValidationReason,
  decodeLookup,
  decodeResolve,
  isOutcomeEventType,
  noteDigestOf,
  isStartBarrierError,
  resolutionCommandOf,
  streamNameOf,
  type AttemptKey,
  replayKeysOfBarrier,
  type ReplayIdentity,
  type StartBarrierRecord,
  type StartOutcomeKind,
} from '../domain';
import { EpochMillis, Identity, decodeOrThrow, integer, strictObject } from '../domain/codecs';
import { attemptValue, replayValuesOf, type RunRow, type StepRunRow } from '../projections/rows';
import { NOTE_PURGE_DIGEST_TAG, fieldsDigest } from '../domain/eventChain';
import { inDoubtStartOf, verifyOutcomeRow, type StartOutcomeRow } from '../projections/outcomeRows';
import { decodeRunRow, decodeStepRunRow } from '../projections/runState';
import { agreedStreamVersion, checkedChain, requireAttemptNotInLog, startsInLog, type StreamHeads } from './checks/readChecks';
import { checkEventRow, type EventRow } from '../domain/eventRows';
import type { EvidenceKeyring } from './evidenceKeys';
import { checkSealedSpan, requireSealedSpan, type SealedSpan } from './eventSeals';
import { LogDerivation, compareStreamHeads, type FinishedStream, type LoggedEventRow } from './checks/logDerivation';
import type { RecoveryApi } from './authority';
import type { AppendOutcome, AttemptHistoryEntry, InDoubtStart, ResolveResult, ResolutionNote, StartOutcome, StoredBarrier, VerifyProblem } from '../domain/records';

// The recovery read models and operator resolutions, written once over a small
// per-backend view. A backend supplies reads inside one snapshot (SQLite: a deferred
// transaction on its one connection; PostgreSQL: a REPEATABLE READ read-only transaction;
// memory: the current tables), and this module owns every rule, so the backends cannot drift.

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
  /** R9.2: binds the purge time (0073 / pg-0042); NULL while the note holds text. */
  readonly purge_digest: string | null;
}

/** The digest a purge writes over the note's identity and its purge time. */
export const purgeDigestOf = (startId: string, noteDigest: string, purgedAtMs: number | string): string =>
  fieldsDigest(NOTE_PURGE_DIGEST_TAG, [startId, noteDigest, Number(purgedAtMs)]);

/** A purged note whose purge time no longer matches its digest, or a note with text that carries a purge, or undefined. */
export const purgeProblemOf = (row: NoteRow): string | undefined => {
  if (row.note_text !== null) {
    return row.purged_at_ms === null && row.purge_digest === null ? undefined : `resolution note ${row.note_digest}: it holds its text and a purge time or purge digest`;
  }
  return row.purged_at_ms !== null && row.purge_digest !== purgeDigestOf(row.start_id, row.note_digest, row.purged_at_ms)
    ? `resolution note ${row.note_digest}: its purge time ${String(row.purged_at_ms)} does not match purge_digest`
    : undefined;
};

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

export interface RecoveryBackend {
  /** Resolution notes (R10.2). */
  readonly notes: NoteStore;
  /** Run `body` against one consistent snapshot. */
  snapshot<T>(body: (view: RecoveryView) => Promise<T>): Promise<T>;
  /** `snapshot` for `verify`, where a backend that refuses its reads on a damaged schema reports the damage instead. */
  verifySnapshot?<T>(body: (view: RecoveryView) => Promise<T>): Promise<T>;
  /** The authority's lifecycle handler (`runs.handle`): resolutions are lifecycle events. */
  handle(command: unknown): Promise<AppendOutcome>;
  /** Business time for a resolution that names none (never the commit time). */
  clock?: () => number;
  /** The deployment keyring (R9.4), if any: outcome events must then be sealed, and `verify` checks every seal. */
  keyring?: () => EvidenceKeyring | undefined;
  /** Sealed invocation plans (R12.2): `verify` counts them, sealed or shredded, and reports one that does not open. */
  plans?: () => InvocationPlans;
}

const PAGE = 200;

/**
 * `verify`'s options: a progress listener or nothing, checked before the walk (a bad listener
 * would fail deep inside it). By hand: the codecs take JSON data, and a listener is a function.
 */
const checkedVerifyOptions = (options: unknown): { onProgress?: VerifyProgressListener } => {
  const refuse = (path: string, reason: ValidationReason, message: string) => new ValidationError('verify options', [{ path, reason, message }]);
  if (options === undefined) return {};
  if (typeof options !== 'object' || options === null || Array.isArray(options)) throw refuse('(root)', 'invalid_value', 'expected an object');
  for (const key of Object.keys(options)) if (key !== 'onProgress') throw refuse(key, 'unknown_field', `unknown field "${key}" (rejected, not stripped)`);
  const { onProgress } = options as { onProgress?: unknown };
  if (onProgress !== undefined && typeof onProgress !== 'function') throw refuse('onProgress', 'invalid_value', 'expected a function');
  return onProgress === undefined ? {} : { onProgress: onProgress as VerifyProgressListener };
};

export const MAX_IN_DOUBT_LIMIT = 10_000;
const InDoubtLimit = integer('InDoubtLimit', 1, MAX_IN_DOUBT_LIMIT);
const InDoubtQueryCodec = strictObject('InDoubtQuery', {}, { projectId: Identity, runId: Identity, olderThanMs: EpochMillis, limit: InDoubtLimit });

const identityValueOf = (b: StartBarrierRecord, identity: ReplayIdentity): string => replayValuesOf(replayKeysOfBarrier(b))[identity];

/**
 * The outcome fact of one start, verified against its event, or null while in doubt. With a
 * keyring the event must also carry the deployment key's seal (R9.4): an outcome appended by
 * INSERT rights alone fails closed.
 */
const outcomeOf = async (v: RecoveryView, startId: string, keys: EvidenceKeyring | undefined): Promise<StartOutcome | null> => {
  const rows = await v.outcomeRows(startId);
  if (rows.length > 1) throw new CorruptRecordError('start outcome', startId, `${rows.length} outcome rows for one start`);
  const row = rows[0];
  if (row === undefined) return null;
  const event = await v.eventById(row.event_id);
  const outcome = verifyOutcomeRow(row, event);
  // R9.2: the outcome is read from its event, so that event must still be the one its chain binds
  if (event?.chain_digest !== undefined) checkedChain(event.stream_id, event.previous_chain ?? '', [{ ...event, global_position: 0 }]);
  if (keys !== undefined && event !== undefined) {
    const p = Number(event.stream_position);
    requireSealedSpan(keys, event.stream_id, await v.sealedSpan(event.stream_id, p, p), p, p);
  }
  return outcome;
};

/** The note a digest binds, verified: its text must hash to the digest, or it is purged. */
const noteOf = (startId: string, noteDigest: string, rows: readonly NoteRow[]): ResolutionNote => {
  const row = rows.find((r) => r.note_digest === noteDigest);
  if (row === undefined) throw new CorruptRecordError('resolution note', startId, `its outcome binds note ${noteDigest}, which is missing`);
  if (row.note_text === null) {
    if (row.purged_at_ms === null) throw new CorruptRecordError('resolution note', startId, 'note has neither text nor a purge time');
    const damaged = purgeProblemOf(row);
    if (damaged !== undefined) throw new CorruptRecordError('resolution note', startId, damaged);
    return { startId, noteDigest, status: 'purged', purgedAtMs: Number(row.purged_at_ms) };
  }
  if (noteDigestOf(row.note_text) !== noteDigest) throw new CorruptRecordError('resolution note', startId, 'note text does not match the digest its outcome binds');
  const damaged = purgeProblemOf(row);
  if (damaged !== undefined) throw new CorruptRecordError('resolution note', startId, damaged);
  return { startId, noteDigest, status: 'present', text: row.note_text };
};

/** R9.3: no barrier under a start id is an answer only if no outcome row names that start either (one probe, on that path only). */
const barrierOrNone = async (v: RecoveryView, startId: string): Promise<StoredBarrier | null> => {
  const b = await v.readBarrier(startId);
  if (b === null && (await v.outcomeRows(startId)).length > 0) throw new CorruptRecordError('start outcome', startId, 'an outcome row names this start but no barrier holds it');
  return b;
};

const requireBarrier = async (v: RecoveryView, startId: string): Promise<StoredBarrier> => {
  const b = await barrierOrNone(v, startId);
  if (b === null) throw new PreconditionError('start_not_found', `no start barrier has startId ${startId}`);
  return b;
};

/**
 * A barrier and its StepRun must agree on whether the attempt is still open: no outcome fact
 * <=> the StepRun is running this very attempt. Returns the disagreement, if any.
 */
const attemptMismatch = async (v: RecoveryView, barrier: StoredBarrier, outcome: StartOutcome | null): Promise<string | undefined> => {
  const b = barrier.record;
  const row = await v.stepRunRow(b.runId, b.stepRunId);
  if (row === undefined) return `its StepRun ${b.runId}/${b.stepRunId} is missing`;
  const s = decodeStepRunRow(row);
  const runsThisAttempt = s.status === 'running' && s.version === b.attempt.startedStepRunVersion && s.lastStartId === b.startId;
  if (outcome === null && !runsThisAttempt) {
    return `no outcome fact, but its StepRun is ${s.status} at version ${s.version} (attempt ${b.attempt.startedStepRunVersion})`;
  }
  if (outcome !== null) {
    if (runsThisAttempt) return `outcome ${outcome.outcome} is recorded, but its StepRun still runs this attempt`;
    if (outcome.stepRunVersion !== b.attempt.startedStepRunVersion + 1) {
      return `outcome moved the StepRun to version ${outcome.stepRunVersion}, expected ${b.attempt.startedStepRunVersion + 1}`;
    }
    if (s.version < outcome.stepRunVersion) return `StepRun is at version ${s.version}, behind its outcome (${outcome.stepRunVersion})`;
  }
  return undefined;
};

/**
 * R9.3: an answer about a Run's starts is given only while its heads agree with its log. Both Run
 * heads set back together over an intact log agree with each other, not with the StepRun heads
 * and barriers or with where the log ends (agreedStreamVersion): one statement, constant cost.
 */
const requireRunHeadsAgree = async (v: RecoveryView, runId: string): Promise<void> => {
  agreedStreamVersion(streamNameOf(runId), await v.runHeads(runId));
};

/** R9.3: a recovery answer is built only from a barrier and a StepRun that agree. */
const requireAgreement = async (v: RecoveryView, barrier: StoredBarrier, outcome: StartOutcome | null): Promise<void> => {
  const mismatch = await attemptMismatch(v, barrier, outcome);
  if (mismatch !== undefined) throw new CorruptRecordError('start outcome', barrier.record.startId, mismatch);
};

/**
 * R9.3: a start's barrier and outcome fact, answered only when they agree with its StepRun: a
 * finished StepRun whose outcome row is gone fails closed, never "no outcome", "no note", an
 * orphan to purge or a resolution to make.
 */
const agreedOutcomeOf = async (v: RecoveryView, startId: string, keys: EvidenceKeyring | undefined): Promise<{ barrier: StoredBarrier; outcome: StartOutcome | null }> => {
  const barrier = await requireBarrier(v, startId);
  await requireRunHeadsAgree(v, barrier.record.runId);
  const outcome = await outcomeOf(v, startId, keys);
  await requireAgreement(v, barrier, outcome);
  return { barrier, outcome };
};

/**
 * R9.3: a running StepRun is an open attempt, so its barrier must exist and be the one the
 * StepRun names; otherwise in-doubt and history would list nothing for a start that ran.
 * Both sides are looked up: the replay index and the barrier's own attempt columns.
 */
const requireBarrierOfRunning = async (v: RecoveryView, row: StepRunRow, keys: EvidenceKeyring | undefined): Promise<string> => {
  const s = decodeStepRunRow(row);
  const where = `${s.runId}/${s.stepRunId}`;
  const attempt = { runId: s.runId, stepRunId: s.stepRunId, startedStepRunVersion: s.version };
  const ids = [...new Set(await v.identityStartIds('attempt', attemptValue(s.runId, s.stepRunId, s.version), attempt))];
  const startId = ids[0];
  if (ids.length !== 1 || startId === undefined || startId !== s.lastStartId) {
    throw new CorruptRecordError(
      'step run',
      where,
      `running at version ${s.version} (start ${s.lastStartId ?? '(none)'}) but its attempt has ${ids.length === 0 ? 'no barrier' : `barrier(s) ${ids.join(', ')}`}`,
    );
  }
  const barrier = await v.readBarrier(startId);
  if (barrier === null) throw new CorruptRecordError('step run', where, `running, but the barrier of start ${startId} is missing`);
  await requireAgreement(v, barrier, await outcomeOf(v, startId, keys));
  return startId;
};

const problemOf = (kind: VerifyProblem['kind'], record: string, e: unknown): VerifyProblem => {
  if (e instanceof CorruptRecordError) return { kind, record, problem: e.message };
  if (isStartBarrierError(e)) return { kind, record, problem: `${e.code}: ${e.message}` };
  throw e;
};

/** verify's finding for an audit event, trace anchor or receipt row its start does not stand behind (either backend's integrity query). */
export const evidenceProblemOf = (r: { table_name: string; record_id: string; start_id: string; has_move: unknown; has_barrier: unknown }): VerifyProblem => {
  const lacks = [r.has_move ? undefined : 'its start has no StepRun move', r.has_barrier ? undefined : "its start's barrier does not name it"].filter((x) => x !== undefined);
  return { kind: 'evidence_without_move', record: `${r.table_name} ${r.record_id}`, problem: `evidence of start ${r.start_id}, but ${lacks.join(' and ')}` };
};

/** The event id a start's fact is logged under, by the identity it holds (the ids the event trigger requires). */
const LOGGED_AS: Partial<Record<ReplayIdentity, { readonly id: (value: string) => string; readonly type: string }>> = {
  traceId: { id: (v) => `trace:${v}`, type: 'TraceAnchorRecorded' },
  auditEventId: { id: (v) => `audit:${v}`, type: 'SecurityAuditEventRecorded' },
  auditReceiptId: { id: (v) => `receipt:${v}`, type: 'AuditReceiptIssued' },
  runEventId: { id: (v) => v, type: 'StepRunStarted' },
};

export const createRecoveryApi = (backend: RecoveryBackend): RecoveryApi => {
  const clock = backend.clock ?? Date.now;

  /**
   * A page of the listing (a limit given): read from the in-doubt index, so it costs the rows
   * it lists (each checked as the whole listing checks it: its barrier, its Run's heads, no
   * outcome, its StepRun running this attempt, and the index row as the barrier holds it),
   * whatever the number in doubt. What a page does not read it does not vouch for: when it is
   * short and no age cutoff is given it lists the whole scope, so a running StepRun beyond it
   * (its barrier or its index row gone) fails it closed; the unlimited listing and `verify`
   * check the whole store. Keyed (R9.4), the Runs whose outcomes could hide a start before the
   * page's last one have their seals checked, as the whole listing does for its scope.
   */
  const inDoubtPage = async (q: { readonly projectId?: string | undefined; readonly runId?: string | undefined; readonly olderThanMs?: number | undefined }, limit: number): Promise<readonly InDoubtStart[]> =>
    backend.snapshot(async (v) => {
      const now = await v.nowMs();
      const scope = { ...(q.projectId === undefined ? {} : { projectId: q.projectId }), ...(q.runId === undefined ? {} : { runId: q.runId }) };
      const cutoff = q.olderThanMs === undefined ? undefined : now - q.olderThanMs;
      const rows = await v.inDoubtIndexPage({ ...scope, ...(cutoff === undefined ? {} : { committedAtOrBeforeMs: cutoff }), limit });
      const keys = backend.keyring?.();
      const out: InDoubtStart[] = [];
      const runsChecked = new Set<string>();
      for (const row of rows) {
        const startId = row.start_id;
        const barrier = await v.readBarrier(startId);
        if (barrier === null) throw new CorruptRecordError('start barrier', startId, 'listed as in doubt but unreadable');
        const b = barrier.record;
        if (b.runId !== row.run_id || b.projectId !== row.project_id || barrier.committedAtMs !== Number(row.committed_at_ms)) {
          throw new CorruptRecordError('in-doubt index', startId, 'its row does not hold what its barrier holds (Project, Run, commit time)');
        }
        if (!runsChecked.has(b.runId)) {
          await requireRunHeadsAgree(v, b.runId);
          runsChecked.add(b.runId);
        }
        const outcome = await outcomeOf(v, startId, keys);
        const mismatch = await attemptMismatch(v, barrier, outcome);
        if (outcome !== null || mismatch !== undefined) throw new CorruptRecordError('start outcome', startId, mismatch ?? 'listed as in doubt but has an outcome');
        out.push(inDoubtStartOf(barrier, now));
      }
      if (rows.length < limit && cutoff === undefined) {
        // The whole scope is listed: every running StepRun in it is one listed start's attempt.
        const listed = new Set(out.map((d) => `${d.runId}\u0000${d.stepRunId}`));
        for (const row of await v.runningStepRuns({ ...scope, limit: out.length + 1 })) {
          if (listed.has(`${row.run_id}\u0000${row.step_run_id}`)) continue;
          const startId = await requireBarrierOfRunning(v, row, keys);
          throw new CorruptRecordError('in-doubt index', startId, 'its StepRun runs this start, which has no outcome, but the in-doubt index does not list it');
        }
      }
      if (keys !== undefined) {
        const last = out[out.length - 1];
        const upTo = rows.length < limit ? cutoff : last === undefined ? cutoff : Math.min(last.committedAtMs, cutoff ?? Number.MAX_SAFE_INTEGER);
        const runIds = q.runId !== undefined ? [q.runId] : await v.resolvedRunIds({ ...scope, ...(upTo === undefined ? {} : { committedAtOrBeforeMs: upTo }) });
        for (const runId of runIds) {
          const stream = streamNameOf(runId);
          requireSealedSpan(keys, stream, await v.sealedSpan(stream, 1, Number.MAX_SAFE_INTEGER), 1, Number.MAX_SAFE_INTEGER);
        }
      }
      return out;
    });

  const recovery: RecoveryApi = {
    inDoubt: async (query = {}) => {
      const q = decodeOrThrow(InDoubtQueryCodec, 'in-doubt query', query);
      if (q.limit !== undefined) return inDoubtPage(q, q.limit);
      return backend.snapshot(async (v) => {
        const now = await v.nowMs();
        const ids = await v.inDoubtStartIds({
          ...(q.projectId === undefined ? {} : { projectId: q.projectId }),
          ...(q.runId === undefined ? {} : { runId: q.runId }),
          ...(q.olderThanMs === undefined ? {} : { committedAtOrBeforeMs: now - q.olderThanMs }),
          ...(q.limit === undefined ? {} : { limit: q.limit }),
        });
        const out: InDoubtStart[] = [];
        const runsChecked = new Set<string>();
        for (const startId of ids) {
          const barrier = await v.readBarrier(startId);
          if (barrier === null) throw new CorruptRecordError('start barrier', startId, 'listed as in doubt but unreadable');
          if (!runsChecked.has(barrier.record.runId)) {
            await requireRunHeadsAgree(v, barrier.record.runId);
            runsChecked.add(barrier.record.runId);
          }
          // The listing says "no outcome row"; re-check through the same path reads use.
          const outcome = await outcomeOf(v, startId, backend.keyring?.());
          const mismatch = await attemptMismatch(v, barrier, outcome);
          if (outcome !== null || mismatch !== undefined) throw new CorruptRecordError('start outcome', startId, mismatch ?? 'listed as in doubt but has an outcome');
          out.push(inDoubtStartOf(barrier, now));
        }
        // The listing starts from barriers; a running StepRun whose barrier is gone must not
        // make the answer "nothing in doubt" (R9.3).
        const scope = { ...(q.projectId === undefined ? {} : { projectId: q.projectId }), ...(q.runId === undefined ? {} : { runId: q.runId }) };
        for (const row of await v.runningStepRuns(scope)) await requireBarrierOfRunning(v, row, backend.keyring?.());
        // Scoped to one whole Run, its log says which starts it made: each is listed or has its
        // outcome, so a start whose barrier and StepRun rows are both gone is not left out.
        if (q.runId !== undefined && q.projectId === undefined && q.olderThanMs === undefined && q.limit === undefined) {
          const listed = new Set(out.map((d) => d.startId));
          for (const { startId } of startsInLog(await v.stepRunStartedRows(q.runId))) {
            if (listed.has(startId) || (await outcomeOf(v, startId, backend.keyring?.())) !== null) continue;
            throw new CorruptRecordError('start outcome', startId, "the Run's log starts it and no outcome is stored for it, but it is not listed as in doubt");
          }
        }
        // R9.4: an outcome appended without the key would take its start off this list. Every
        // Run stream whose outcome does so is checked whole (its seals, one read per Run): a
        // store-wide listing costs one such read per Run with an outcome in its scope.
        const keys = backend.keyring?.();
        if (keys !== undefined) {
          const runIds =
            q.runId !== undefined
              ? [q.runId]
              : await v.resolvedRunIds({
                  ...(q.projectId === undefined ? {} : { projectId: q.projectId }),
                  ...(q.olderThanMs === undefined ? {} : { committedAtOrBeforeMs: now - q.olderThanMs }),
                });
          for (const runId of runIds) {
            const stream = streamNameOf(runId);
            requireSealedSpan(keys, stream, await v.sealedSpan(stream, 1, Number.MAX_SAFE_INTEGER), 1, Number.MAX_SAFE_INTEGER);
          }
        }
        return out;
      });
    },

    history: async (runId, stepRunId) => {
      const r = decodeOrThrow(t.tuple([Identity, Identity]), 'history request', [runId, stepRunId]);
      return backend.snapshot(async (v) => {
        await requireRunHeadsAgree(v, r[0]);
        const entries: AttemptHistoryEntry[] = [];
        for (const startId of await v.attemptStartIds(r[0], r[1])) {
          const barrier = await v.readBarrier(startId);
          if (barrier === null) throw new CorruptRecordError('start barrier', startId, 'listed in the attempt history but unreadable');
          const attempt = barrier.record.attempt.startedStepRunVersion;
          const previous = entries[entries.length - 1];
          if (previous !== undefined && previous.attempt >= attempt) {
            throw new CorruptRecordError('attempt history', `${r[0]}/${r[1]}`, `attempt ${attempt} is bound to more than one barrier or out of order`);
          }
          const outcome = await outcomeOf(v, startId, backend.keyring?.());
          await requireAgreement(v, barrier, outcome);
          entries.push({ attempt, barrier, outcome });
        }
        // R9.3: the log, not the barrier table, says how often this StepRun was started, and its
        // head names the last start: a barrier row deleted (or one added) fails the read, never
        // shortens (or lengthens) the list.
        const logged = startsInLog(await v.stepRunStartedRows(r[0]), r[1]).map((s) => s.startId);
        const listed = entries.map((e) => e.barrier.record.startId);
        if (logged.length !== listed.length || logged.some((id, i) => id !== listed[i])) {
          throw new CorruptRecordError('attempt history', `${r[0]}/${r[1]}`, `the Run's log starts it ${logged.length} time(s) (${logged.join(', ') || 'never'}) but its barriers name ${listed.join(', ') || 'none'}`);
        }
        const row = await v.stepRunRow(r[0], r[1]);
        if (row === undefined && listed.length === 0 && (await v.stepRunCreatedRows(r[0])).some((e) => (checkEventRow(e).data as { stepRunId?: string }).stepRunId === r[1])) {
          throw new CorruptRecordError('attempt history', `${r[0]}/${r[1]}`, "the Run's log creates this StepRun but its head row is missing");
        }
        const last = row === undefined ? undefined : decodeStepRunRow(row).lastStartId;
        if (last !== listed[listed.length - 1]) {
          throw new CorruptRecordError('attempt history', `${r[0]}/${r[1]}`, `its StepRun ${row === undefined ? 'is missing' : `names ${last ?? 'no start'} as its last start`} but the history ends at ${listed[listed.length - 1] ?? 'no start'}`);
        }
        // The running attempt is the head's last start, so the check above put it in the list.
        if (row !== undefined && row.status === 'running') await requireBarrierOfRunning(v, row, backend.keyring?.());
        return entries;
      });
    },

    lookup: async (identity, value) => {
      const request = decodeLookup(identity, value);
      const key =
        request.identity === 'attempt'
          ? attemptValue(request.value.runId, request.value.stepRunId, request.value.startedStepRunVersion)
          : request.value;
      return backend.snapshot(async (v) => {
        const ids = await v.identityStartIds(request.identity, key, request.identity === 'attempt' ? request.value : undefined);
        const distinct = [...new Set(ids)];
        if (distinct.length > 1) {
          throw new CorruptRecordError('replay index', key, `${request.identity} names ${distinct.length} barriers (${distinct.join(', ')})`);
        }
        const startId = distinct[0];
        if (startId === undefined) {
          // Null only if nothing else says the start exists (R9.3): for a start id, the barrier
          // read's own check (index, mutation and outcome rows); for an attempt, the Run's log.
          if (request.identity === 'startId') return barrierOrNone(v, key);
          if (request.identity === 'attempt') {
            const a = request.value;
            return requireAttemptNotInLog(key, a.stepRunId, a.startedStepRunVersion, await v.stepRunStartedRows(a.runId));
          }
          // for a fact's id, that fact's own event in the log (its event id names it: one probe)
          const logged = LOGGED_AS[request.identity];
          if (logged !== undefined && (await v.eventById(logged.id(key)))?.event_type === logged.type) {
            throw new CorruptRecordError('replay index', key, `the Run's log holds the event of this ${request.identity}, but no index or fact row names it`);
          }
          return null;
        }
        const barrier = await v.readBarrier(startId);
        if (barrier === null) throw new CorruptRecordError('replay index', key, `${request.identity} names start ${startId}, which has no barrier`);
        if (identityValueOf(barrier.record, request.identity) !== key) {
          throw new CorruptRecordError('replay index', key, `${request.identity} names start ${startId}, whose barrier binds another value`);
        }
        return barrier;
      });
    },

    outcome: async (startId) => {
      const id = decodeOrThrow(Identity, 'startId', startId);
      return backend.snapshot(async (v) => (await agreedOutcomeOf(v, id, backend.keyring?.())).outcome);
    },

    resolve: async (startId, outcome, options) => {
      const req = decodeResolve(startId, outcome, options);
      const settled = (existing: StartOutcome): ResolveResult => {
        if (existing.outcome === req.outcome) return { status: 'existing', outcome: existing };
        throw new SemanticConflictError(
          'startId',
          req.startId,
          req.startId,
          `start ${req.startId} is already resolved as ${existing.outcome} by ${existing.decidedBy}; outcomes are facts, not edits (retry with a new attempt instead)`,
        );
      };
      const before = await backend.snapshot((v) => agreedOutcomeOf(v, req.startId, backend.keyring?.()));
      if (before.outcome !== null) return settled(before.outcome);
      const b = before.barrier.record;
      // R10.2: the note goes to its side record first; the event then binds its digest. If the
      // event is not ours in the end (a failure, a racing resolver), our note is purged again.
      const note = req.options.note === undefined ? undefined : { digest: noteDigestOf(req.options.note), text: req.options.note };
      if (note !== undefined) await backend.notes.put(req.startId, note.digest, note.text);
      const dropOrphanNote = async (bound: StartOutcome | null): Promise<void> => {
        if (note !== undefined && bound?.noteDigest !== note.digest) await backend.notes.purge(req.startId, note.digest);
      };
      const command = resolutionCommandOf(
        { startId: b.startId, runId: b.runId, stepRunId: b.stepRunId, startedStepRunVersion: b.attempt.startedStepRunVersion },
        req.outcome as StartOutcomeKind,
        req.options,
        clock(),
      );
      try {
        await backend.handle(command);
      } catch (e) {
        const after = await backend.snapshot((v) => outcomeOf(v, req.startId, backend.keyring?.())).catch(() => null);
        await dropOrphanNote(after);
        // Lost a race with another resolver: the winner's fact decides, exactly as a replay would.
        if (!(e instanceof PreconditionError)) throw e;
        if (after === null) throw e;
        return settled(after);
      }
      const recorded = await backend.snapshot((v) => outcomeOf(v, req.startId, backend.keyring?.()));
      if (recorded === null) throw new CorruptRecordError('start outcome', req.startId, 'the outcome event was appended but not projected');
      return { status: 'recorded', outcome: recorded };
    },

    note: async (startId) => {
      const id = decodeOrThrow(Identity, 'startId', startId);
      const outcome = await backend.snapshot(async (v) => (await agreedOutcomeOf(v, id, backend.keyring?.())).outcome);
      if (outcome?.noteDigest === undefined) return null;
      return noteOf(id, outcome.noteDigest, await backend.notes.rows(id));
    },

    purgeNote: async (startId) => {
      const id = decodeOrThrow(Identity, 'startId', startId);
      const outcome = await backend.snapshot(async (v) => (await agreedOutcomeOf(v, id, backend.keyring?.())).outcome);
      // An orphan (a resolve that stopped between its note and its outcome event) is purged too:
      // it is no evidence, but its text is a person's words kept for nothing (R10.2).
      // Nothing is purged until every row reads as what it is: the note the outcome binds is
      // there, and each text still hashes to its digest. A damaged row is never an orphan to
      // purge (that would destroy the only copy of a bound note's text).
      const rows = await backend.notes.rows(id);
      if (outcome?.noteDigest !== undefined) noteOf(id, outcome.noteDigest, rows);
      for (const r of rows) {
        if (r.note_text !== null && noteDigestOf(r.note_text) !== r.note_digest) throw new CorruptRecordError('resolution note', id, `note ${r.note_digest}: its text does not hash to its digest`);
        const damaged = purgeProblemOf(r);
        if (damaged !== undefined) throw new CorruptRecordError('resolution note', id, damaged);
      }
      const orphans = rows.filter((r) => r.note_text !== null && r.note_digest !== outcome?.noteDigest);
      for (const o of orphans) await backend.notes.purge(id, o.note_digest);
      if (outcome?.noteDigest === undefined) {
        const last = orphans[orphans.length - 1];
        if (last === undefined) throw new PreconditionError('note_not_found', `the outcome of start ${id} binds no note`);
        const row = (await backend.notes.rows(id)).find((r) => r.note_digest === last.note_digest);
        return { startId: id, noteDigest: last.note_digest, status: 'purged', purgedAtMs: Number(row?.purged_at_ms) };
      }
      const current = noteOf(id, outcome.noteDigest, await backend.notes.rows(id));
      if (current.status === 'purged') return current;
      await backend.notes.purge(id, outcome.noteDigest);
      return noteOf(id, outcome.noteDigest, await backend.notes.rows(id));
    },

    verify: async (options = {}) => {
      const { onProgress } = checkedVerifyOptions(options);
      const walkSnapshot = <T>(body: (view: RecoveryView) => Promise<T>): Promise<T> => (backend.verifySnapshot ?? backend.snapshot).call(backend, body) as Promise<T>;
      const problems: VerifyProblem[] = [];
      /** Walks a damaged store cut short (a row its page cannot decode, a table gone). */
      const cutShort = new Set<string>();
      /**
       * One walk of the store. Damage that stops it (CorruptRecordError: the backends map a
       * missing table or an unreadable page to it) is reported, and verify goes on with the next
       * walk: it never throws for damage. Anything else (the store unavailable) still throws.
       */
      const walk = async (kind: VerifyProblem['kind'], what: string, body: () => Promise<void>): Promise<void> => {
        try {
          await body();
        } catch (e) {
          if (!(e instanceof CorruptRecordError)) throw e;
          cutShort.add(what);
          problems.push({ kind, record: what, problem: `the walk of ${what} stopped on damage, so what follows it was not checked: ${e.message}` });
        }
      };
      let counts: RecoveryCounts = { barriers: 0, outcomes: 0, runs: 0, stepRuns: 0, events: 0 };
      await walk('schema', 'counts', async () => void (counts = await walkSnapshot((v) => v.counts())));
      const progress = createVerifyProgress(counts, onProgress);
      const checked = { barriers: 0, outcomes: 0, runs: 0, stepRuns: 0, events: 0 };
      const notes = { present: 0, purged: 0 };
      const warnings: VerifyProblem[] = [];
      /** `startId NUL noteDigest` of every note an outcome event binds. */
      const boundNotes = new Set<string>();
      const keys = backend.keyring?.();
      const seals = { sealed: 0, legacy: 0 };
      // What is stored, kept to compare with what the log derives (R9.2), after the event pass.
      const storedBarriers = new Set<string>();
      const storedOutcomeEvents = new Set<string>();
      // Only keys are kept: each stream's stored heads are read when its fold ends.
      const storedRuns = new Set<string>();
      /** `run/step` -> run id of every StepRun row not yet derived by a stream. */
      const storedStepRuns = new Map<string, string>();
      const log = new LogDerivation();

      // Every barrier and its facts (R5.3), and whether its StepRun agrees with its outcome.
      await walk('barrier', 'barriers', async () => {
        for (let after = ''; ; ) {
          const ids = await walkSnapshot(async (v) => {
            const page = await v.barrierIdsAfter(after, PAGE);
            for (const startId of page) {
              storedBarriers.add(startId);
              try {
                const barrier = await v.readBarrier(startId);
                if (barrier === null) throw new CorruptRecordError('start barrier', startId, 'listed but unreadable');
                let outcome: StartOutcome | null = null;
                try {
                  outcome = await outcomeOf(v, startId, backend.keyring?.());
                } catch (e) {
                  problems.push(problemOf('outcome', startId, e));
                  continue;
                }
                const mismatch = await attemptMismatch(v, barrier, outcome);
                if (mismatch !== undefined) problems.push({ kind: 'in_doubt_mismatch', record: startId, problem: mismatch });
              } catch (e) {
                problems.push(problemOf('barrier', startId, e));
              }
            }
            return page;
          });
          if (ids.length === 0) break;
          after = ids[ids.length - 1]!;
          checked.barriers += ids.length;
          progress.tick('barriers', ids.length);
        }
      });

      // Every outcome row against its event (a row whose barrier is gone is caught by the FK check).
      await walk('outcome', 'outcomes', async () => {
        for (let after = ''; ; ) {
          const rows = await walkSnapshot(async (v) => {
            const page = await v.outcomeRowsAfter(after, PAGE);
            for (const row of page) {
              storedOutcomeEvents.add(row.event_id);
              try {
                verifyOutcomeRow(row, await v.eventById(row.event_id));
                // the outcome event's seal is the stream pass's finding, reported once there
              } catch (e) {
                problems.push(problemOf('outcome', row.start_id, e));
              }
            }
            return page;
          });
          if (rows.length === 0) break;
          after = rows[rows.length - 1]!.start_id;
          checked.outcomes += rows.length;
          progress.tick('outcomes', rows.length);
        }
      });

      await walk('run', 'runs', async () => {
        for (let after = ''; ; ) {
          const rows = await walkSnapshot(async (v) => {
            const page = await v.runRowsAfter(after, PAGE);
            for (const row of page) {
              storedRuns.add(row.run_id);
              try {
                decodeRunRow(row, row.stream_version);
              } catch (e) {
                problems.push(problemOf('run', row.run_id, e));
              }
              if (keys !== undefined) {
                // R9.4: every event of the stream sealed, or legacy (before the seal origin)
                const stream = streamNameOf(row.run_id);
                const to = row.stream_version === null ? Number.MAX_SAFE_INTEGER : Number(row.stream_version);
                const found = checkSealedSpan(keys, stream, await v.sealedSpan(stream, 1, to), 1, to);
                for (const f of found.findings) problems.push({ kind: 'event_seal', ...f });
                seals.sealed += found.sealed;
                seals.legacy += found.legacy;
              }
            }
            return page;
          });
          if (rows.length === 0) break;
          after = rows[rows.length - 1]!.run_id;
          checked.runs += rows.length;
          progress.tick('runs', rows.length);
        }
      });

      // Every StepRun row decodes, and none is running without the barrier of its attempt.
      await walk('step_run', 'step_runs', async () => {
        for (let after: readonly [string, string] = ['', '']; ; ) {
          const rows = await walkSnapshot(async (v) => {
            const page = await v.stepRunRowsAfter(after, PAGE);
            for (const row of page) {
              const where = `${row.run_id}/${row.step_run_id}`;
              storedStepRuns.set(where, row.run_id);
              try {
                const s = decodeStepRunRow(row);
                if (s.status !== 'running') continue;
                const key = attemptValue(s.runId, s.stepRunId, s.version);
                const ids = [...new Set(await v.identityStartIds('attempt', key, { runId: s.runId, stepRunId: s.stepRunId, startedStepRunVersion: s.version }))];
                if (ids.length !== 1 || ids[0] !== s.lastStartId) {
                  problems.push({
                    kind: 'running_without_barrier',
                    record: where,
                    problem: `StepRun is running at version ${s.version} (start ${s.lastStartId ?? '(none)'}) but its attempt has ${ids.length === 0 ? 'no barrier' : `barrier(s) ${ids.join(', ')}`}`,
                  });
                }
              } catch (e) {
                problems.push(problemOf('step_run', where, e));
              }
            }
            return page;
          });
          if (rows.length === 0) break;
          const last = rows[rows.length - 1]!;
          after = [last.run_id, last.step_run_id];
          checked.stepRuns += rows.length;
          progress.tick('step_runs', rows.length);
        }
      });

      // The stored heads of a stream the log has finished, against what it derives (R9.2).
      const headProblems = async (v: RecoveryView, finished: FinishedStream | undefined): Promise<VerifyProblem[]> => {
        if (finished?.runId === undefined) return [];
        const stored = await v.headsOfRun(finished.runId);
        const found = compareStreamHeads(finished, stored.run, stored.stepRuns);
        storedRuns.delete(finished.runId);
        for (const key of found.derivedStepKeys) storedStepRuns.delete(key);
        return found.problems;
      };

      // Every event of the log decodes strictly and is stored canonically; each stream is folded whole.
      await walk('event', 'events', async () => {
        for (let after: readonly [string, number] = ['', 0]; ; ) {
          const rows = await walkSnapshot(async (v) => {
            const page = await v.eventRowsByStreamAfter(after, PAGE);
            for (const row of page) {
              let e: ReturnType<typeof checkEventRow> | null = null;
              try {
                e = checkEventRow(row);
                // R10.2: a note an outcome binds must be there, as text that matches, or purged
                if (isOutcomeEventType(e.type) && 'resolution' in e.data && e.data.resolution.noteDigest !== undefined) {
                  const { startId, resolution } = e.data as { startId: string; resolution: { noteDigest: string } };
                  boundNotes.add(`${startId}\u0000${resolution.noteDigest}`);
                  const n = noteOf(startId, resolution.noteDigest, await backend.notes.rows(startId));
                  if (n.status === 'purged') notes.purged++;
                  else notes.present++;
                }
              } catch (err) {
                problems.push(problemOf('event', `${row.stream_id}@${row.stream_position}`, err));
              }
              // decoded once: the fold takes this decoding, or its failure
              const folded = log.add(row, e);
              problems.push(...folded.problems);
              problems.push(...(await headProblems(v, folded.finished)));
            }
            if (page.length === 0) problems.push(...(await headProblems(v, log.finish())));
            return page;
          });
          if (rows.length === 0) break;
          const last = rows[rows.length - 1]!;
          after = [last.stream_id, Number(last.stream_position)];
          checked.events += rows.length;
          progress.tick('events', rows.length);
        }
      });

      // Every head and read model against the log (R9.2), both ways: what no stream derived. Only
      // between walks that reached their end: a walk cut short would list what it never read.
      const whole = (...walks: string[]) => !cutShort.has('events') && walks.every((w) => !cutShort.has(w));
      if (whole('runs')) for (const runId of storedRuns) {
        if (!log.undecidableRuns.has(runId)) problems.push({ kind: 'head', record: runId, problem: 'a Run head without a RunCreated in the log' });
      }
      if (whole('step_runs')) for (const [key, runId] of storedStepRuns) {
        if (!log.undecidableRuns.has(runId)) problems.push({ kind: 'head', record: key, problem: 'a StepRun head without its StepRunCreated in the log' });
      }
      if (whole('barriers')) for (const id of log.barrierStartIds) {
        if (!storedBarriers.has(id)) problems.push({ kind: 'head', record: id, problem: 'the log commits this start but its barrier row is missing' });
      }
      if (whole('barriers')) for (const id of storedBarriers) {
        if (!log.barrierStartIds.has(id)) problems.push({ kind: 'head', record: id, problem: 'a barrier row without its ToolExecutionStartBarrierCommitted in the log' });
      }
      if (whole('outcomes')) for (const id of log.outcomeEventIds) {
        if (!storedOutcomeEvents.has(id)) problems.push({ kind: 'head', record: id, problem: 'the log records this outcome event but its start_outcomes row is missing' });
      }

      // The in-doubt index (a read model the listing pages through) against the log, both ways.
      const indexed = new Set<string>();
      await walk('head', 'in_doubt_starts', async () => {
        for (let after = ''; ; ) {
          const rows = await walkSnapshot((v) => v.inDoubtIndexRowsAfter(after, PAGE));
          for (const row of rows) {
            indexed.add(row.start_id);
            const derived = log.inDoubt.get(row.start_id);
            if (derived === undefined) {
              problems.push({ kind: 'head', record: row.start_id, problem: 'the in-doubt index lists this start, but the log does not commit it or records its outcome' });
            } else if (derived.projectId !== row.project_id || derived.runId !== row.run_id || derived.committedAtMs !== Number(row.committed_at_ms)) {
              problems.push({ kind: 'head', record: row.start_id, problem: "the in-doubt index row does not hold the Project, Run and commit time of the start's barrier event" });
            }
          }
          if (rows.length === 0) break;
          after = rows[rows.length - 1]!.start_id;
        }
      });
      if (whole('in_doubt_starts')) for (const [startId, d] of log.inDoubt) {
        if (!indexed.has(startId) && !log.undecidableRuns.has(d.runId)) problems.push({ kind: 'head', record: startId, problem: 'the log commits this start with no outcome, but the in-doubt index does not list it' });
      }

      // R10.2: a note no outcome binds is an orphan of a resolve that stopped between its note
      // and its outcome event. It is not evidence and weakens none (nothing binds it), so it is
      // a warning, not a difference: verify stays ok. One that still holds text is listed, for
      // `purge-note`; a purged orphan (what a failed resolve leaves) is not.
      await walk('note', 'resolution_notes', async () => {
        for (const row of await backend.notes.all()) {
          const damaged = boundNotes.has(`${row.start_id}\u0000${row.note_digest}`) ? undefined : purgeProblemOf(row);
          if (damaged !== undefined) problems.push({ kind: 'note', record: row.start_id, problem: damaged });
          if (row.note_text === null || boundNotes.has(`${row.start_id}\u0000${row.note_digest}`)) continue;
          warnings.push({ kind: 'orphan_note', record: row.start_id, problem: `resolution note ${row.note_digest} is bound by no outcome and still holds text: purge it (purge-note)` });
        }
      });

      // R12.2: a plan is outside the evidence; shredded (or its key destroyed) is not damage, a changed one is.
      let plans: { sealed: number; shredded: number } | undefined;
      if (backend.plans !== undefined) {
        await walk('plan', 'invocation_plans', async () => {
          const audit = await backend.plans!()
            .audit(async (id) => (await backend.snapshot((v) => v.readBarrier(id)).catch(() => null))?.record.admission.planDigest)
            .catch((e: unknown) => {
              // a schema changed under the authority: the integrity walk below reports it once
              if (e instanceof CorruptRecordError && e.recordKind === 'schema') return { sealed: 0, shredded: 0, problems: [] };
              throw e;
            });
          // a store that never sealed a plan and holds no key reports nothing of plans
          if (backend.plans!().keyed || audit.sealed + audit.shredded + audit.problems.length > 0) plans = { sealed: audit.sealed, shredded: audit.shredded };
          for (const p of audit.problems) problems.push({ kind: 'plan', ...p });
        });
      }

      progress.integrity(false);
      await walk('schema', 'integrity checks', async () => void problems.push(...(await walkSnapshot((v) => v.integrityProblems()))));
      progress.integrity(true);
      return { ok: problems.length === 0, checked, notes, ...(keys === undefined ? {} : { seals }), ...(plans === undefined ? {} : { plans }), problems, warnings };
    },
  };
  return recovery;
};
