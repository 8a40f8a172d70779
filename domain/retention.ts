import { DIGEST_PATTERN, RECORD_TAGS, digestOf } from './canonical';
import { REPLAY_IDENTITIES, ValidationError, type ReplayIdentity } from './errors';
import type { StepRunStatus } from './events';

// R14.2 retention: which Runs may be compacted, and the record that binds what compaction
// removed. Pure: the stores read the rows, this decides and digests.

/** A StepRun in one of these can never move again: its Run's evidence is complete. */
export const TERMINAL_STEP_RUN_STATUSES: readonly StepRunStatus[] = ['completed', 'failed'];

/** Why a Run is kept (a `compact` call reports each Run it skipped with one of these). */
export type CompactionBlocker =
  /** A StepRun is not completed or failed (it may still start, or be retried after `lost`). */
  | 'step_run_not_terminal'
  /** A start has no outcome fact: its adapter may or may not have acted. */
  | 'attempt_in_doubt'
  /** A driver holds a live lease on one of its starts. */
  | 'live_driver_claim'
  /** Its last event was committed at or after the cut-off. */
  | 'finished_after_cutoff';

export interface RunRetentionFacts {
  readonly stepRunStatuses: readonly StepRunStatus[];
  readonly starts: number;
  readonly outcomes: number;
  readonly liveClaims: number;
  /** The database clock of the Run's last event. */
  readonly finishedAtMs: number;
}

/** The first reason the Run must be kept, or undefined when it may be compacted. */
export const compactionBlockerOf = (run: RunRetentionFacts, beforeMs: number): CompactionBlocker | undefined => {
  if (run.stepRunStatuses.some((s) => !TERMINAL_STEP_RUN_STATUSES.includes(s))) return 'step_run_not_terminal';
  if (run.outcomes < run.starts) return 'attempt_in_doubt';
  if (run.liveClaims > 0) return 'live_driver_claim';
  if (!(run.finishedAtMs < beforeMs)) return 'finished_after_cutoff';
  return undefined;
};

/** One barrier removed, as the record keeps it: enough to answer its replay and to prove what it was. */
export interface CompactedBarrier {
  readonly startId: string;
  readonly stepRunId: string;
  readonly attempt: number;
  readonly commandDigest: string;
  readonly barrierDigest: string;
}

export interface CompactedIdentity {
  readonly identity: ReplayIdentity;
  readonly value: string;
  readonly startId: string;
}

/** What a compacted Run keeps: everything removed, bound by digest (R14.2). */
export interface CompactionRecord {
  readonly runId: string;
  readonly projectId: string;
  /** The stream's version (its event count) when compacted. */
  readonly streamVersion: number;
  /** The digest of every removed event row, in stream order (compactedLogDigestOf). */
  readonly logDigest: string;
  /** The chain link of the stream's last event, on stores that chain the log (R9.2); null otherwise. */
  readonly lastChainDigest: string | null;
  /** The global positions the removed events held, as [from, to] ranges (the log stays dense where it is not compacted). */
  readonly globalPositions: readonly (readonly [number, number])[];
  readonly barriers: readonly CompactedBarrier[];
  readonly identities: readonly CompactedIdentity[];
  readonly finishedAtMs: number;
  readonly beforeMs: number;
  readonly compactedAtMs: number;
}

export interface CompactedEventRow {
  readonly stream_position: number;
  readonly event_id: string;
  readonly event_type: string;
  readonly data_json: string;
  readonly committed_at_ms: number;
}

export const compactedLogDigestOf = (events: readonly CompactedEventRow[]): string =>
  digestOf(
    RECORD_TAGS.compactedLog,
    [...events].sort((a, b) => a.stream_position - b.stream_position).map((e) => [e.stream_position, e.event_id, e.event_type, e.data_json, Number(e.committed_at_ms)]),
  );

/** The rows of one Run a store read under its write lock, to compact them. */
export interface CompactionInput {
  readonly runId: string;
  readonly projectId: string;
  readonly streamVersion: number;
  readonly events: readonly (CompactedEventRow & { readonly global_position: number; readonly chain_digest?: string | null })[];
  readonly barriers: readonly { readonly start_id: string; readonly step_run_id: string; readonly started_step_run_version: number; readonly command_digest: string; readonly barrier_digest: string }[];
  readonly identities: readonly { readonly identity: ReplayIdentity; readonly value: string; readonly start_id: string }[];
  readonly beforeMs: number;
  readonly compactedAtMs: number;
}

const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** The record that binds every removed row of the Run (the same on every backend). */
export const compactionRecordOf = (i: CompactionInput): CompactionRecord => {
  const events = [...i.events].sort((a, b) => a.stream_position - b.stream_position);
  return {
    runId: i.runId,
    projectId: i.projectId,
    streamVersion: i.streamVersion,
    logDigest: compactedLogDigestOf(events),
    lastChainDigest: events.at(-1)?.chain_digest ?? null,
    globalPositions: positionRanges(events.map((e) => Number(e.global_position))),
    barriers: [...i.barriers]
      .sort((a, b) => byText(a.start_id, b.start_id))
      .map((b) => ({ startId: b.start_id, stepRunId: b.step_run_id, attempt: Number(b.started_step_run_version), commandDigest: b.command_digest, barrierDigest: b.barrier_digest })),
    identities: [...i.identities]
      .sort((a, b) => byText(a.identity, b.identity) || byText(a.value, b.value))
      .map((r) => ({ identity: r.identity, value: r.value, startId: r.start_id })),
    finishedAtMs: Math.max(...events.map((e) => Number(e.committed_at_ms))),
    beforeMs: i.beforeMs,
    compactedAtMs: i.compactedAtMs,
  };
};

/** The record's digest: what a store keeps beside it and `verify` recomputes. */
export const compactionDigestOf = (record: CompactionRecord): string => digestOf(RECORD_TAGS.runCompaction, record);

/** Positions as ranges: [3, 4, 5, 9] -> [[3, 5], [9, 9]]. */
export const positionRanges = (positions: readonly number[]): [number, number][] => {
  const ranges: [number, number][] = [];
  for (const p of [...positions].sort((a, b) => a - b)) {
    const last = ranges.at(-1);
    if (last !== undefined && p === last[1] + 1) last[1] = p;
    else ranges.push([p, p]);
  }
  return ranges;
};

/**
 * A stored record read back: its JSON must decode to a record whose digest is the one stored
 * beside it, for the Run it is keyed by. Undefined when it is whole, otherwise the problem.
 */
export const compactionRecordProblem = (runId: string, recordJson: string, storedDigest: string): string | undefined => {
  let record: CompactionRecord;
  try {
    record = JSON.parse(recordJson) as CompactionRecord;
  } catch {
    return 'its record is not JSON';
  }
  if (!DIGEST_PATTERN.test(storedDigest)) return 'its digest is not a sha256 digest';
  if (record === null || typeof record !== 'object' || record.runId !== runId) return `its record is not the record of Run ${runId}`;
  if (!Array.isArray(record.identities) || !Array.isArray(record.barriers)) return 'its record lists no barriers or identities';
  if (compactionDigestOf(record) !== storedDigest) return 'its record does not match its digest';
  const starts = new Set(record.barriers.map((b) => b.startId));
  if (record.identities.some((i) => !REPLAY_IDENTITIES.includes(i.identity) || !starts.has(i.startId))) return 'its record binds an identity to a start it does not hold';
  if (record.identities.length !== record.barriers.length * REPLAY_IDENTITIES.length) return 'its record does not bind every identity of every start';
  return undefined;
};

const ISO_DATE = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2}))?$/;

/**
 * `compact({ before })`: a date (ISO 8601, `2026-01-31` or with a time and zone) or epoch ms.
 * Every bad input is a ValidationError naming the field; nothing is written.
 */
export const decodeCompactOptions = (input: unknown): { readonly beforeMs: number } => {
  const bad = (path: string, message: string, reason: 'invalid_value' | 'unknown_field' = 'invalid_value') =>
    new ValidationError('compact options', [{ path, reason, message }]);
  if (input === null || typeof input !== 'object' || Array.isArray(input) || Object.getPrototypeOf(input) !== Object.prototype) throw bad('', 'give { before: <date> }');
  const unknown = Object.keys(input).find((k) => k !== 'before');
  if (unknown !== undefined) throw bad(unknown, `unknown field ${unknown}`, 'unknown_field');
  const before = (input as { before?: unknown }).before;
  if (typeof before === 'number') {
    if (!Number.isSafeInteger(before) || before < 0) throw bad('before', 'epoch milliseconds must be a non-negative safe integer');
    return { beforeMs: before };
  }
  if (typeof before !== 'string' || !ISO_DATE.test(before)) throw bad('before', 'give an ISO 8601 date (2026-01-31, or 2026-01-31T00:00:00Z) or epoch milliseconds');
  const ms = Date.parse(before.length === 10 ? `${before}T00:00:00Z` : before);
  if (!Number.isFinite(ms) || ms < 0) throw bad('before', `${before} is not a date`);
  return { beforeMs: ms };
};

/** What one `compact` call did: the Runs compacted, and each Run kept with its reason. */
export interface CompactReport {
  readonly beforeMs: number;
  readonly compacted: readonly { readonly runId: string; readonly compactionDigest: string; readonly starts: number; readonly events: number }[];
  readonly kept: readonly { readonly runId: string; readonly reason: CompactionBlocker }[];
}
