import * as t from 'io-ts';
import { CorruptRecordError, noReplayHits, streamNameOf, type ReplayHit, type ReplayHits, type ReplayIdentity, type ReplayKeys, type RunState, type StepRunState } from '../../domain';
import { attemptValue, replayValuesOf } from '../../projections/rows';
import { decodeRunRow, decodeStepRunRow, runStateOf } from '../../projections/runState';
import { checkStartRows } from '../../application/checks/checkRows';
import { agreedAttemptStart, requireAttemptNotInLog, requireHeadAtLogEnd, requireHeadIsItsLog, requireNoLogOfHeadless, requireNoTraceOfStart, wholeStream, type StreamHeads } from '../../application/checks/readChecks';
import type { EventRow } from '../../domain/eventRows';
import type { StoredBarrier, StoredEvent } from '../../domain/records';
import type { EvidenceKeyring } from '../../application/evidenceKeys';
import { requireSealedSpan } from '../../application/eventSeals';
import { identityRowsOfFacts, paramOf } from './identities';
import { readSealedSpan } from './postgresSeals';
import { run, type Queryable } from './query';
import {
  AuditEventRowCodec,
  AuditReceiptRowCodec,
  BarrierRowCodec,
  EvidenceMacRowCodec,
  ChainedEventRowCodec,
  EventRowCodec,
  MutationRowCodec,
  PgInt,
  ReplayIdentityRowCodec,
  RunRowCodec,
  StepRunRowCodec,
  TraceAnchorRowCodec,
  atMostOne,
  decodeArrayRows,
  decodeRow,
  decodeRows,
  namedRow,
} from './rowCodecs';
import * as SQL from './sql';

// The PostgreSQL reads: each one statement, each row decoded with io-ts and re-verified (R5.3).
// Used inside a start or lifecycle transaction (on its connection) and outside one (the pool).

/** The Run head, its stream head and one StepRun (inside a write, under the Run's turn: R3.2). */
export const loadRunState = async (q: Queryable, runId: string, stepRunId: string | undefined): Promise<RunState> => {
  const [row] = await run<RunStateColumns & { last_step_run_event: unknown }>(q, SQL.READ_RUN_STATE, {
    run_id: runId,
    stream_id: streamNameOf(runId),
    step_run_id: stepRunId ?? null,
  });
  const state = runStateOfRow(row, runId, stepRunId);
  if (stepRunId !== undefined && state.run !== null && state.stepRuns[stepRunId] === undefined) requireNoLogOfHeadless(runId, stepRunId, lastStepRunEventOfRow(row, runId));
  return state;
};

export interface RunStateColumns {
  readonly run: unknown;
  readonly stream_version: unknown;
  readonly step_run: unknown;
  /** Whether the stream has events; read only when the Run head is missing. */
  readonly log_without_run?: unknown;
}

/** The Run state of a READ_RUN_STATE (or READ_START) row, each column decoded. */
export const runStateOfRow = (row: RunStateColumns | undefined, runId: string, stepRunId: string | undefined): RunState => {
  if (row === undefined || row.run === null) {
    if (row !== undefined && (row.stream_version !== null || row.step_run !== null || row.log_without_run === true)) {
      throw new CorruptRecordError('run', runId, 'the stream, its log, a StepRun or a start barrier exists but the run head is missing');
    }
    return runStateOf(null, []);
  }
  const head = decodeRunRow(
    decodeRow(RunRowCodec, row.run, 'run', runId),
    row.stream_version === null ? null : decodeRow(PgInt, row.stream_version, 'stream', streamNameOf(runId)),
  );
  const stepRuns = row.step_run === null ? [] : [decodeStepRunRow(decodeRow(StepRunRowCodec, row.step_run, 'step run', `${runId}/${stepRunId}`))];
  return runStateOf(head, stepRuns);
};

/** R9.3: a start refused for a missing Run (its first read leaves the log out) is refused so only if nothing else says the Run exists. */
export const requireNoTraceOfRun = async (q: Queryable, runId: string): Promise<void> => {
  const [row] = await run<{ traced: unknown }>(q, SQL.RUN_TRACES, { stream_id: streamNameOf(runId), run_id: runId });
  if (row?.traced === true) throw new CorruptRecordError('run', runId, 'the stream, its log, a StepRun or a start barrier exists but the run head is missing');
};

/** R3.1: every identity of the command through its own unique key, one statement. */
export const lookupReplay = async (q: Queryable, keys: ReplayKeys): Promise<ReplayHits> => {
  const values = replayValuesOf(keys);
  const rows = await run(q, SQL.LOOKUP_REPLAY, Object.fromEntries(Object.entries(values).map(([identity, value]) => [paramOf(identity), value])));
  const hits = noReplayHits() as Record<ReplayIdentity, ReplayHit[]>;
  for (const raw of rows) {
    const r = decodeRow(ReplayIdentityRowCodec, raw, 'replay index', keys.startId);
    hits[r.identity] = [...hits[r.identity], { startId: r.start_id, commandDigest: r.command_digest }];
  }
  return hits;
};

/** R5.3: one statement fetches every row a barrier binds; checkStartRows re-derives them all. */
export const readBarrier = async (q: Queryable, startId: string, keys?: EvidenceKeyring): Promise<StoredBarrier | null> => {
  const [row] = await run<Record<string, unknown>>(q, SQL.READ_BARRIER, { start_id: startId });
  if (row === undefined) return null;
  const verified = verifyBarrierRow(row, startId);
  // No barrier and no index row: an answer only if no StepRun mutation names the start either (R9.3).
  if (verified === null) {
    return requireNoTraceOfStart(startId, 0, decodeRow(PgInt, row.mutations_naming_start, 'step run mutation', startId), decodeRow(PgInt, row.log_naming_start, 'event', startId));
  }
  if (keys === undefined) return verified;
  return keys.verify(verified, await macRowsOf(q, startId));
};

const macRowsOf = async (q: Queryable, startId: string) =>
  (await run(q, SQL.SELECT_EVIDENCE_MACS, { start_id: startId })).map((r) => decodeRow(EvidenceMacRowCodec, r, 'evidence MAC', startId));

/**
 * The barrier columns of one read (READ_BARRIER, or the start's first round trip, READ_START),
 * verified: null when no barrier row and nothing else names the start, else every row checked.
 */
export const verifyBarrierRow = (row: Record<string, unknown>, startId: string): StoredBarrier | null => {
  const kind = 'start barrier';
  const barrier = atMostOne(decodeArrayRows(BarrierRowCodec, SQL.BARRIER_COLUMNS, row.barriers, kind, startId), kind, startId);
  if (barrier === undefined) return null;
  const facts = {
    barrier,
    audit: atMostOne(decodeArrayRows(AuditEventRowCodec, SQL.AUDIT_COLUMNS, row.audits, 'security audit event', startId), 'security audit event', startId),
    trace: atMostOne(decodeArrayRows(TraceAnchorRowCodec, SQL.TRACE_COLUMNS, row.traces, 'trace anchor', startId), 'trace anchor', startId),
    receipt: atMostOne(decodeArrayRows(AuditReceiptRowCodec, SQL.RECEIPT_COLUMNS, row.receipts, 'audit receipt', startId), 'audit receipt', startId),
    mutation: atMostOne(decodeArrayRows(MutationRowCodec, SQL.MUTATION_COLUMNS, row.mutations, 'step run mutation', startId), 'step run mutation', startId),
  };
  const events = eventsOfRead(row, startId);
  // The facts' own keys are the replay identities: their rows, as read, are the identity rows.
  const identities = identityRowsOfFacts({ ...facts, runEventRead: events.some((e) => e.event_id === barrier.run_event_id) });
  return checkStartRows({ ...facts, events, identities });
};

/** The events of a barrier read, each given back its JSON: the text column its place names (sql.ts). */
const eventsOfRead = (row: Record<string, unknown>, startId: string) => {
  const raw = row.events;
  if (raw === null || raw === undefined) return [];
  if (!Array.isArray(raw)) throw new CorruptRecordError('event', startId, 'expected a list of rows');
  if (raw.length > SQL.EVENTS_AROUND) throw new CorruptRecordError('event', startId, `${raw.length} events around one RunEvent, at most ${SQL.EVENTS_AROUND} expected`);
  let last = 0;
  return raw.map((r: unknown) => {
    const [n, ...cells] = Array.isArray(r) ? (r as unknown[]) : [];
    if (typeof n !== 'number' || !Number.isInteger(n) || n <= last || n > SQL.EVENTS_AROUND) throw new CorruptRecordError('event', startId, 'the events around the RunEvent are out of order');
    last = n;
    const event = namedRow(cells, SQL.EVENT_AROUND_COLUMNS, 'event', startId);
    event['data_json'] = row[SQL.EVENT_DATA_COLUMNS[n - 1]!];
    return decodeRow(EventRowCodec, event, 'event', startId);
  });
};

/** The MAC rows a READ_START row carries (json), for the keyring's check (R9.4). */
export const macRowsOfRead = (row: Record<string, unknown>, startId: string) => decodeRows(EvidenceMacRowCodec, row.macs, 'evidence MAC', startId);

/** R5.4 lookup by attempt: the barrier's own unique key (run, StepRun, started version). */
export const readBarrierOfAttempt = async (q: Queryable, runId: string, stepRunId: string, startedStepRunVersion: number, keys?: EvidenceKeyring): Promise<StoredBarrier | null> => {
  const value = attemptValue(runId, stepRunId, startedStepRunVersion);
  const find = async () => {
    const rows = await run<{ start_id: string }>(q, SQL.FIND_ATTEMPT, {
      run_id: runId,
      step_run_id: stepRunId,
      started_step_run_version: startedStepRunVersion,
    });
    // The attempt's own unique key is the index: the barriers under it must be at most one.
    const barriers = rows.map((r) => r.start_id);
    return agreedAttemptStart(value, barriers, barriers);
  };
  let startId = await find();
  if (startId === undefined) {
    try {
      return requireAttemptNotInLog(value, stepRunId, startedStepRunVersion, await eventsOfType(q, runId, 'StepRunStarted'));
    } catch (e) {
      // Two statements, two snapshots: a start that committed between them is in the log and,
      // read again after it, under the barrier's key too. Only a key that still lacks it is damage.
      startId = await find();
      if (startId === undefined) throw e;
    }
  }
  const found = await readBarrier(q, startId, keys);
  if (found === null) throw new CorruptRecordError('replay index', value, `attempt names start ${startId}, which has no barrier`);
  return found;
};

/** The event rows of one type in one Run stream, in order (rows as stored, for a check of the log). */
export const eventsOfType = async (q: Queryable, runId: string, eventType: string): Promise<EventRow[]> =>
  (await run(q, SQL.STREAM_EVENTS_OF_TYPE, { stream_id: streamNameOf(runId), event_type: eventType })).map((r) => decodeRow(EventRowCodec, r, 'event', streamNameOf(runId)));

/**
 * R9.3: a stream position the Run's heads call free was taken. Under the Run's turn no other
 * writer can have taken it since the read, so unless the heads (read again, in this fresh
 * snapshot) end where the log ends, they are behind it: damage, never a lost race to retry.
 */
export const requireHeadsAtLogEnd = async (q: Queryable, runId: string): Promise<void> => {
  const stream = streamNameOf(runId);
  const [row] = await run<{ stream_version: unknown; run_version: unknown; logged: unknown }>(q, SQL.HEADS_AND_LOG_END, { stream_id: stream, run_id: runId });
  const at = (v: unknown, what: string) => (v === null || v === undefined ? 0 : decodeRow(PgInt, v, what, stream));
  const [streamVersion, runVersion, logged] = [at(row?.stream_version, 'stream'), at(row?.run_version, 'run'), at(row?.logged, 'event')];
  if (streamVersion !== logged || runVersion !== logged) {
    throw new CorruptRecordError('run head', runId, `the Run head is at ${runVersion} and its stream head at ${streamVersion}, but its log holds events to ${logged}`);
  }
};

/** The StepRun's last event a READ_START or READ_STEP_RUN_AND_LOG_END row carries (json), decoded. */
export const lastStepRunEventOfRow = (row: { last_step_run_event?: unknown } | undefined, runId: string): EventRow | undefined => {
  const last = row?.last_step_run_event;
  return last === null || last === undefined ? undefined : decodeRow(EventRowCodec, last, 'event', streamNameOf(runId));
};

/**
 * The Run state with its StepRun, whose head must end where the StepRun's log ends (R9.1): the
 * check a PostgreSQL start makes on its own read, since a probe of the log inside the
 * SERIALIZABLE write would lock index pages that starts of other Runs insert into.
 */
export const runStateAtLogEnd = (row: (RunStateColumns & { last_step_run_event?: unknown }) | undefined, runId: string, stepRunId: string): RunState => {
  const state = runStateOfRow(row, runId, stepRunId);
  const s = state.stepRuns[stepRunId];
  if (s !== undefined) requireHeadAtLogEnd(s, lastStepRunEventOfRow(row, runId));
  else if (state.run !== null) requireNoLogOfHeadless(runId, stepRunId, lastStepRunEventOfRow(row, runId));
  return state;
};

/** A StepRun's state from its head, checked against its last event in the Run's log, both read in one snapshot. */
export const loadStepRunAtLogEnd = async (q: Queryable, runId: string, stepRunId: string): Promise<RunState> => {
  const [row] = await run<RunStateColumns & { last_step_run_event: unknown }>(q, SQL.READ_STEP_RUN_AND_LOG_END, {
    run_id: runId,
    stream_id: streamNameOf(runId),
    step_run_id: stepRunId,
  });
  return runStateAtLogEnd(row, runId, stepRunId);
};

type StepRunLogColumns = { run_created: unknown; step_run_log: unknown };

const stepRunLogOfRow = (row: StepRunLogColumns | undefined, runId: string): [runCreated: EventRow | undefined, log: EventRow[]] => {
  const stream = streamNameOf(runId);
  const runCreated = row?.run_created === null || row?.run_created === undefined ? undefined : decodeRow(EventRowCodec, row.run_created, 'event', stream);
  return [runCreated, decodeRow(t.array(EventRowCodec), row?.step_run_log ?? [], 'event', stream)];
};

/** The Run's first event and the StepRun's events in version order (a lifecycle refusal or an outcome checks the head against them). */
export const stepRunLogOf = async (q: Queryable, runId: string, stepRunId: string): Promise<[runCreated: EventRow | undefined, log: EventRow[]]> => {
  const [row] = await run<StepRunLogColumns>(q, SQL.READ_STEP_RUN_LOG, { stream_id: streamNameOf(runId), step_run_id: stepRunId });
  return stepRunLogOfRow(row, runId);
};

/**
 * getStepRun's read: the StepRun's state from its head, which must be the StepRun its log made
 * (requireHeadIsItsLog), head and log read in one statement.
 */
export const loadStepRunFromLog = async (q: Queryable, runId: string, stepRunId: string): Promise<StepRunState | undefined> => {
  const [row] = await run<RunStateColumns & StepRunLogColumns>(q, SQL.READ_STEP_RUN_WITH_LOG, { run_id: runId, stream_id: streamNameOf(runId), step_run_id: stepRunId });
  const [runCreated, log] = stepRunLogOfRow(row, runId);
  const state = runStateOfRow(row, runId, stepRunId);
  const s = state.stepRuns[stepRunId];
  if (s !== undefined) requireHeadIsItsLog(s, runCreated, log);
  else if (state.run !== null) requireNoLogOfHeadless(runId, stepRunId, log[log.length - 1]);
  return s;
};

type RunHeadRow = { stream_version: unknown; run_version: unknown; step_run_events: unknown; starts: unknown; log_end?: unknown };

/** The StreamHeads of a READ_STREAM or RUN_HEADS row, each count decoded. */
const runHeadsOfRow = (row: RunHeadRow | undefined, stream: string): StreamHeads => {
  const version = (v: unknown, what: string) => (v === null || v === undefined ? null : decodeRow(PgInt, v, what, stream));
  const heads = { stream: version(row?.stream_version, 'stream'), run: version(row?.run_version, 'run'), stepRunEvents: version(row?.step_run_events, 'step run') ?? 0, starts: version(row?.starts, 'start barrier') ?? 0 };
  return row !== undefined && 'log_end' in row ? { ...heads, logEnd: version(row.log_end, 'event') } : heads;
};

/** The heads of one Run and where its log ends, in one statement (recovery's check, R9.3). */
export const runHeadsOf = async (q: Queryable, runId: string): Promise<StreamHeads> => {
  const stream = streamNameOf(runId);
  const [row] = await run<RunHeadRow>(q, SQL.RUN_HEADS, { stream_id: stream, run_id: runId });
  return runHeadsOfRow(row, stream);
};

/** Every event of `run-<runId>`, decoded, in order, and matching the stream head. */
export const readStream = async (q: Queryable, runId: string, keys?: EvidenceKeyring): Promise<readonly StoredEvent[]> => {
  const stream = streamNameOf(runId);
  const [row] = await run<RunHeadRow & { events: unknown }>(q, SQL.READ_STREAM, { stream_id: stream, run_id: runId });
  const rows = decodeRows(ChainedEventRowCodec, row?.events ?? null, 'event', stream);
  const events = wholeStream(stream, runHeadsOfRow(row, stream), rows);
  // R9.4: with a keyring every event is sealed, or legacy (before the seal origin)
  if (keys !== undefined && events.length > 0) requireSealedSpan(keys, stream, await readSealedSpan(q, stream, 1, events.length), 1, events.length);
  return events;
};
