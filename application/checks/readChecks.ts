import { canonicalJsonOf, CorruptRecordError, evolve, initialRunState, stepRunDigest, type RunState, type StepRunState } from '../../domain';
import { MOVES_FROM, OUTCOME_EVENTS, STATUS_AFTER } from '../../domain/stepRunMoves';
import { type EventRow, checkEventRow, checkedStoredEventOf } from '../../domain/eventRows';
import { eventChainDigest } from '../../domain/eventChain';
import type { StoredEvent } from '../../domain/records';

// Checks every backend's read paths share (R9.3): a stream must be whole, and the two indexes
// of an attempt (the replay index and the barrier's own attempt columns) must agree. Each
// answers from what both sides say, never from whichever side happens to be present.

/** An event row as a store reads it back: with its chain digest where the store keeps the chain (SQLite, PostgreSQL). */
export type ReadEventRow = EventRow & { readonly global_position: number; readonly chain_digest?: string | null };

/**
 * R9.2 on every read of a stream, not only in `verify`: each row must carry the chain digest
 * that binds it to the row before it (`previous`: the predecessor's stored digest, '' before
 * position 1), so a changed cell fails the read that returns it. A store that keeps no chain
 * (memory) reads its rows without a `chain_digest` field; a null one is damage.
 */
export const checkedChain = (stream: string, previous: string, rows: readonly ReadEventRow[]): void => {
  let link = previous;
  for (const r of rows) {
    if (r.chain_digest === undefined) return;
    if (r.chain_digest !== eventChainDigest(link, r)) {
      throw new CorruptRecordError('event', `${stream}@${r.stream_position}`, 'its chain digest does not bind it to the event before it: a cell of this event or of the one before it was changed (R9.2)');
    }
    link = r.chain_digest;
  }
};

/**
 * What a stream read checks its log against, read in one snapshot: the stream's and the Run's
 * head versions (null: no row), the sum of the Run's StepRun head versions (0: none), how many
 * start barriers name the Run, and where the log ends (the last position, null: no event), when
 * the read does not fetch every event anyway.
 */
export interface StreamHeads {
  readonly stream: number | null;
  readonly run: number | null;
  readonly stepRunEvents: number;
  readonly starts: number;
  readonly logEnd?: number | null;
}

/**
 * The events a Run's heads account for: its RunCreated, each StepRun's own events (a StepRun
 * head's version counts them) and the four other facts of each start (audit event, trace
 * anchor, receipt, barrier; the fifth, StepRunStarted, is a StepRun event).
 */
const accountedEvents = (heads: StreamHeads): number => 1 + heads.stepRunEvents + 4 * heads.starts;

/**
 * R9.3: the version a stream's heads and its log agree on. A missing or disagreeing head is
 * damage, never an empty or shorter stream; so is a stream head the StepRun heads and barriers
 * do not account for (its last events deleted and both Run heads set back with them).
 */
export const agreedStreamVersion = (stream: string, heads: StreamHeads): number => {
  if (heads.stream !== heads.run) throw new CorruptRecordError('stream', stream, `the stream head is at version ${heads.stream ?? '(missing)'} but the Run head at ${heads.run ?? '(missing)'}`);
  if (heads.stream === null && heads.stepRunEvents > 0) throw new CorruptRecordError('stream', stream, 'the Run has StepRun heads but no stream or Run head');
  if (heads.stream === null && heads.starts > 0) throw new CorruptRecordError('stream', stream, `${heads.starts} start barrier(s) name this Run but it has no stream or Run head`);
  if (heads.stream !== null && heads.stream !== accountedEvents(heads)) {
    throw new CorruptRecordError(
      'stream',
      stream,
      `the stream head is at version ${heads.stream}, but the Run's StepRun heads and start barriers account for ${accountedEvents(heads)} events (RunCreated, ${heads.stepRunEvents} StepRun events, 4 more for each of ${heads.starts} starts)`,
    );
  }
  const version = heads.stream ?? 0;
  if (heads.logEnd !== undefined && (heads.logEnd ?? 0) !== version) throw new CorruptRecordError('stream', stream, `the stream head is at version ${version} but its log ends at ${heads.logEnd ?? 0}`);
  return version;
};

/**
 * R9.2 on every read of a stream: its events' global positions rise with their stream
 * positions (the global order follows each stream). The chain does not bind global positions,
 * so a swapped or moved one is caught here and by `verify`, never returned.
 */
export const checkedGlobalOrder = (stream: string, rows: readonly ReadEventRow[]): void => {
  for (let i = 1; i < rows.length; i++) {
    if (!(Number(rows[i]!.global_position) > Number(rows[i - 1]!.global_position))) {
      throw new CorruptRecordError('stream', stream, `global position ${rows[i]!.global_position} at position ${rows[i]!.stream_position} is not after ${rows[i - 1]!.global_position} at position ${rows[i - 1]!.stream_position}`);
    }
  }
};

/** The events of one stream, in order: positions 1..n with no gap, n equal to the heads, each chained to the one before it. */
export const wholeStream = (stream: string, heads: StreamHeads, rows: readonly ReadEventRow[]): StoredEvent[] => {
  const version = agreedStreamVersion(stream, heads);
  if (version !== rows.length) throw new CorruptRecordError('stream', stream, `stream head is at version ${version} but it holds ${rows.length} events`);
  rows.forEach((r, i) => {
    if (Number(r.stream_position) !== i + 1) throw new CorruptRecordError('stream', stream, `expected position ${i + 1}, found ${r.stream_position}`);
  });
  checkedGlobalOrder(stream, rows);
  checkedChain(stream, '', rows);
  return rows.map(checkedStoredEventOf);
};

/**
 * R9.3: a read that found no barrier answers null only if nothing else says the start exists.
 * `indexed`: replay-index rows naming it; `mutations`: StepRun mutation rows naming it; `logged`:
 * its barrier event in the Run's log.
 */
export const requireNoTraceOfStart = (startId: string, indexed: number, mutations: number, logged: number): null => {
  if (indexed > 0) throw new CorruptRecordError('start barrier', startId, 'the replay index names this start but its barrier row is missing');
  if (mutations > 0) throw new CorruptRecordError('start barrier', startId, 'its StepRun mutation row names this start but its barrier row is missing');
  if (logged > 0) throw new CorruptRecordError('start barrier', startId, "the Run's log commits this start (its barrier event) but its barrier row is missing");
  return null;
};

/**
 * The starts of one StepRun (of every StepRun without `stepRunId`) as the Run's log records them, in stream order. `started`: the
 * StepRunStarted rows of the Run's stream, each decoded strictly (a damaged one fails the read).
 */
export const startsInLog = (started: readonly EventRow[], stepRunId?: string): { readonly startId: string; readonly stepRunVersion: number }[] => {
  const starts: { startId: string; stepRunVersion: number }[] = [];
  for (const row of started) {
    const event = checkEventRow(row);
    if (event.type === 'StepRunStarted' && (stepRunId === undefined || event.data.stepRunId === stepRunId)) starts.push({ startId: event.data.startId, stepRunVersion: event.data.stepRunVersion });
  }
  return starts;
};

/** R9.3: an attempt the replay index and the barrier table both do not know answers null only if the Run's log did not start it either. */
export const requireAttemptNotInLog = (attempt: string, stepRunId: string, startedStepRunVersion: number, started: readonly EventRow[]): null => {
  const logged = startsInLog(started, stepRunId).find((s) => s.stepRunVersion === startedStepRunVersion);
  if (logged !== undefined) throw new CorruptRecordError('start barrier', attempt, `the Run's log starts this attempt (start ${logged.startId}) but no barrier or index row holds it`);
  return null;
};

/**
 * R9.3: a StepRun with no head row is one to decide on as absent (a create, a "not found") only
 * if the Run's log holds no event of it. `last`: its last event in the log (one index probe),
 * read only on that path.
 */
export const requireNoLogOfHeadless = (runId: string, stepRunId: string, last: EventRow | undefined): void => {
  if (last !== undefined) throw new CorruptRecordError('step run', `${runId}/${stepRunId}`, `the Run's log creates this StepRun (its last event: ${last.event_type}) but its head row is missing`);
};

/**
 * R9.3: a StepRun head answers only where its log ends. `last`: the StepRun's last event in the
 * Run's log (its highest StepRun version). The head is a projection, so a head row rewritten
 * with its digest recomputed would otherwise be answered as the StepRun's state.
 */
export const requireHeadAtLogEnd = (s: StepRunState, last: EventRow | undefined): void => {
  const at = `${s.runId}/${s.stepRunId}`;
  if (last === undefined) throw new CorruptRecordError('step run', at, "its head row exists but the Run's log never creates it");
  const event = checkEventRow(last);
  const d = event.data as { stepRunId?: string; stepRunVersion?: number; startId?: string };
  const status = STATUS_AFTER[event.type];
  if (status === undefined || d.stepRunId !== s.stepRunId) throw new CorruptRecordError('step run', at, `its log's last StepRun event is a ${event.type} of ${d.stepRunId ?? '(none)'}`);
  if (d.stepRunVersion !== s.version || status !== s.status || (d.startId !== undefined && d.startId !== s.lastStartId)) {
    throw new CorruptRecordError(
      'step run',
      at,
      `its head is ${s.status} at version ${s.version} (last start ${s.lastStartId ?? 'none'}), but its log ends in ${event.type} at version ${String(d.stepRunVersion)}${d.startId === undefined ? '' : ` of start ${d.startId}`}`,
    );
  }
};

/**
 * R9.3: a StepRun is answered as the StepRun its log made, not only as one that ends where its
 * log ends. `runCreated`: the Run's first event; `log`: the StepRun's events in version order.
 * A head whose tool definition, approval or Project was rewritten with its digest recomputed
 * ends where its log ends and still differs from it. A read, not a start, pays for the fold.
 */
export const requireHeadIsItsLog = (s: StepRunState, runCreated: EventRow | undefined, log: readonly EventRow[]): void => {
  requireHeadAtLogEnd(s, log[log.length - 1]);
  const at = `${s.runId}/${s.stepRunId}`;
  let state: RunState = initialRunState();
  for (const [i, row] of [runCreated, ...log].entries()) {
    const event = row === undefined ? undefined : checkEventRow(row);
    const version = (event?.data as { stepRunVersion?: unknown } | undefined)?.stepRunVersion;
    if (i === 0 ? event?.type !== 'RunCreated' : version !== i || (i === 1) !== (event?.type === 'StepRunCreated')) {
      throw new CorruptRecordError('step run', at, i === 0 ? "its Run's log does not begin with RunCreated" : `its log does not run StepRunCreated, then versions 1 to ${log.length} in turn (at ${i}: ${event?.type ?? 'none'} at version ${String(version)})`);
    }
    state = evolve(state, event!);
  }
  const made = state.stepRuns[s.stepRunId]!;
  const differs = (['projectId', 'kind', 'toolDefinition', 'approval'] as const).filter((k) => canonicalJsonOf(made[k] ?? null) !== canonicalJsonOf(s[k] ?? null));
  if (differs.length > 0 || stepRunDigest(made) !== stepRunDigest(s) || made.lastStartId !== s.lastStartId) {
    throw new CorruptRecordError('step run', at, `its head differs from the StepRun its log made${differs.length > 0 ? ` (${differs.join(', ')})` : ''}: the head row was rewritten`);
  }
};

/**
 * R9.1 in memory, as the SQL stores' triggers: a StepRun event after
 * StepRunCreated follows its StepRun's last event in the log, one version on, by a move the
 * lifecycle allows; an outcome names the start it follows. `last`: that last event, if any.
 */
export const requireFollowsStepRunLog = (last: EventRow | undefined, next: { type: string; stepRunId: string; stepRunVersion: number; startId?: string | undefined }): void => {
  if (last === undefined && next.type === 'StepRunCreated') return;
  const prev = last === undefined ? undefined : (checkEventRow(last).data as { stepRunVersion?: number; startId?: string });
  const from = last === undefined ? undefined : STATUS_AFTER[last.event_type];
  const follows =
    prev !== undefined &&
    from !== undefined &&
    prev.stepRunVersion === next.stepRunVersion - 1 &&
    (MOVES_FROM[next.type] ?? []).includes(from) &&
    (!OUTCOME_EVENTS.includes(next.type) || prev.startId === next.startId);
  if (!follows) {
    throw new CorruptRecordError(
      'run history',
      'events',
      `illegal history refused: ${next.type} of StepRun ${next.stepRunId} at version ${next.stepRunVersion} does not follow its last event in the log (${last?.event_type ?? 'none'}); the StepRun head is not where its log ends (R9.1)`,
    );
  }
};

/**
 * The start of one attempt, from the start ids the replay index binds to it and those the
 * barrier table's attempt columns hold: undefined when neither knows it, a typed error when they
 * disagree or either names more than one.
 */
export const agreedAttemptStart = (attempt: string, indexed: readonly string[], barriers: readonly string[]): string | undefined => {
  if (indexed.length > 1) throw new CorruptRecordError('replay index', attempt, `attempt is bound to ${indexed.length} barriers`);
  if (barriers.length > 1) throw new CorruptRecordError('start barrier', attempt, `${barriers.length} barriers claim this attempt`);
  if (indexed.length === 0 && barriers.length === 0) return undefined;
  if (indexed[0] !== barriers[0]) {
    throw new CorruptRecordError('replay index', attempt, `the index names start ${indexed[0] ?? '(none)'} but the barrier table names ${barriers[0] ?? '(none)'}`);
  }
  return indexed[0];
};
