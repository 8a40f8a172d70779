import { isDeepStrictEqual } from 'node:util';
import {
  CorruptRecordError,
  OUTCOME_EVENT_TYPES,
  isOutcomeEventType,
  streamNameOf,
  type EventOf,
  type RunStreamEvent,
  type StartOutcomeKind,
} from '../domain';
import type { InDoubtStart, StartOutcome, StoredBarrier } from '../domain/records';
import { checkEventRow, type EventRow } from '../domain/eventRows';

// Recovery read model as pure row derivations shared by every backend. The stores
// write `start_outcomes` rows in the transaction that appends the outcome event; reads
// re-derive the row from that event and demand equality (R5.3), and the rebuild specs derive
// the whole table again from the event log and compare.

/** One row per start that has an outcome fact. A barrier without one is in doubt. */
export interface StartOutcomeRow {
  start_id: string;
  run_id: string;
  step_run_id: string;
  outcome: StartOutcomeKind;
  decided_by: string;
  reason: string;
  outcome_digest: string | null;
  /** The StepRun version the outcome event moved the StepRun to. */
  step_run_version: number;
  event_id: string;
  stream_position: number;
  requested_at_ms: number;
  committed_at_ms: number;
}

type OutcomeEvent = EventOf<'StepRunCompleted'> | EventOf<'StepRunFailed'> | EventOf<'StepRunLost'>;

const isOutcomeEvent = (e: RunStreamEvent): e is OutcomeEvent => isOutcomeEventType(e.type);

/** The row an appended event projects to, or undefined for every other event type. */
export const outcomeRowOf = (stored: { eventId: string; streamPosition: number; committedAtMs: number; event: RunStreamEvent }): StartOutcomeRow | undefined => {
  const e = stored.event;
  if (!isOutcomeEvent(e)) return undefined;
  const d = e.data;
  return {
    start_id: d.startId,
    run_id: d.runId,
    step_run_id: d.stepRunId,
    outcome: OUTCOME_EVENT_TYPES[e.type],
    decided_by: d.resolution.decidedBy,
    reason: d.resolution.reason,
    outcome_digest: 'outcomeDigest' in d && d.outcomeDigest !== undefined ? d.outcomeDigest : null,
    step_run_version: d.stepRunVersion,
    event_id: stored.eventId,
    stream_position: stored.streamPosition,
    requested_at_ms: d.occurredAtMs,
    committed_at_ms: stored.committedAtMs,
  };
};


const asNumber = (v: unknown): unknown => (typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v);

/** R5.3 for the recovery read model: the stored row must equal the row its event projects to. */
export const verifyOutcomeRow = (row: StartOutcomeRow, event: EventRow | undefined): StartOutcome => {
  const bad = (problem: string): never => {
    throw new CorruptRecordError('start outcome', row.start_id, problem);
  };
  if (event === undefined) return bad(`its event ${row.event_id} is missing from the log`);
  if (event.stream_id !== streamNameOf(row.run_id)) bad(`its event ${row.event_id} is in stream ${event.stream_id}, not run-${row.run_id}`);
  const decoded = checkEventRow(event);
  const expected = outcomeRowOf({
    eventId: event.event_id,
    streamPosition: Number(event.stream_position),
    committedAtMs: Number(event.committed_at_ms),
    event: decoded,
  });
  if (expected === undefined) return bad(`its event ${row.event_id} is a ${event.event_type}, not an outcome`);
  for (const [k, v] of Object.entries(expected)) {
    if (!isDeepStrictEqual(asNumber((row as unknown as Record<string, unknown>)[k]), v)) bad(`${k} does not match its event`);
  }
  // ticket and note digest live in the event only (R10.2): the verified event is their source
  const resolution = isOutcomeEvent(decoded) ? decoded.data.resolution : undefined;
  return {
    ...startOutcomeOf(expected),
    ...(resolution?.ticket === undefined ? {} : { ticket: resolution.ticket }),
    ...(resolution?.noteDigest === undefined ? {} : { noteDigest: resolution.noteDigest }),
  };
};

export const startOutcomeOf = (row: StartOutcomeRow): StartOutcome => ({
  startId: row.start_id,
  runId: row.run_id,
  stepRunId: row.step_run_id,
  outcome: row.outcome,
  decidedBy: row.decided_by,
  reason: row.reason,
  ...(row.outcome_digest === null ? {} : { outcomeDigest: row.outcome_digest }),
  stepRunVersion: Number(row.step_run_version),
  eventId: row.event_id,
  streamPosition: Number(row.stream_position),
  requestedAtMs: Number(row.requested_at_ms),
  committedAtMs: Number(row.committed_at_ms),
});

/** The in-doubt view of a verified barrier, aged by the database clock. */
export const inDoubtStartOf = (barrier: StoredBarrier, nowMs: number): InDoubtStart => {
  const b = barrier.record;
  return {
    startId: b.startId,
    projectId: b.projectId,
    runId: b.runId,
    stepRunId: b.stepRunId,
    attempt: b.attempt.startedStepRunVersion,
    adapter: b.contracts.adapter,
    executionClass: b.admission.executionClass,
    timeoutMs: b.admission.timeoutMs,
    traceId: b.trace.traceId,
    spanId: b.trace.spanId,
    requestedAtMs: b.requestedAtMs,
    committedAtMs: barrier.committedAtMs,
    ageMs: Math.max(0, nowMs - barrier.committedAtMs),
    barrierDigest: barrier.barrierDigest,
  };
};

/**
 * Rebuild: fold the whole event log (in global order) into the rows the recovery read model
 * must hold. The specs compare this with the stored table; `verify` uses it per row.
 */
export const rebuildOutcomeRows = (events: readonly EventRow[]): StartOutcomeRow[] =>
  events.flatMap((row) => {
    if (!isOutcomeEventType(row.event_type)) return [];
    const r = outcomeRowOf({
      eventId: row.event_id,
      streamPosition: Number(row.stream_position),
      committedAtMs: Number(row.committed_at_ms),
      event: checkEventRow(row),
    });
    return r === undefined ? [] : [r];
  });

/** Normalise driver output (pg BIGINT as string) so rows compare by value. */
export const normaliseOutcomeRow = (row: StartOutcomeRow): StartOutcomeRow => ({
  ...row,
  step_run_version: Number(row.step_run_version),
  stream_position: Number(row.stream_position),
  requested_at_ms: Number(row.requested_at_ms),
  committed_at_ms: Number(row.committed_at_ms),
});
