import {
  CorruptRecordError,
  PreconditionError,
  REPLAY_IDENTITIES,
  noReplayHits,
  streamNameOf,
  type ReplayHit,
  type ReplayHits,
  type ReplayIdentity,
  type ReplayKeys,
  type RunState,
  type StepRunState,
} from '../../domain';
import { attemptValue, replayKeysOfBarrierRow, replayValuesOf, type BarrierRow, type ReplayIdentityRow, type RunRow, type StepRunRow } from '../../projections/rows';
import { decodeRunRow, decodeStepRunRow, runStateOf } from '../../projections/runState';
import type { EventRow } from '../../domain/eventRows';
import { checkStartRows } from '../../application/checks/checkRows';
import { agreedAttemptStart, requireAttemptNotInLog, requireNoLogOfHeadless, requireNoTraceOfStart, wholeStream, type StreamHeads } from '../../application/checks/readChecks';
import type { StoredBarrier, StoredEvent } from '../../domain/records';
import type { EvidenceKeyring, EvidenceMacRow } from '../../application/evidenceKeys';
import { requireSealedSpan } from '../../application/eventSeals';
import { IDENTITY_STORAGE } from './identities';
import { readSealedSpan } from './sqliteSeals';
import type { Statements } from './statements';

// The SQLite reads, synchronous on the authority's one connection, always inside one of its
// transactions (a snapshot). Every row is re-verified before it is returned (R5.3).

type HeadRow = RunRow & { stream_version: number | null };

export const loadRunState = (s: Statements, runId: string, stepRunIds: readonly string[]): RunState => {
  const head = s.runHead.get(streamNameOf(runId), runId) as HeadRow | undefined;
  return runStateFrom(s, runId, head, head === undefined ? [] : stepRunIds.map((id) => [id, s.stepRun.get(runId, id) as StepRunRow | undefined]));
};

/** What a start reads under its lock: the Run state, the link of the event at its head, the clock. */
export interface StartHead {
  readonly state: RunState;
  readonly chain: string | undefined;
  readonly nowMs: number | undefined;
}

type StartHeadRow = HeadRow & { chain_digest: string | null; now_ms: number } & { [K in keyof StepRunRow as `sr_${K}`]: StepRunRow[K] | null };

/** loadRunState for one StepRun, its row, the chain link and the clock read by one statement. */
export const loadStartHead = (s: Statements, runId: string, stepRunId: string): StartHead => {
  const head = s.startHead.get(streamNameOf(runId), stepRunId, runId) as StartHeadRow | undefined;
  const stepRun: StepRunRow | undefined =
    head === undefined || head.sr_step_run_id === null
      ? undefined
      : {
          run_id: head.sr_run_id!,
          step_run_id: head.sr_step_run_id,
          project_id: head.sr_project_id!,
          kind: head.sr_kind!,
          status: head.sr_status!,
          version: head.sr_version!,
          digest: head.sr_digest!,
          state_json: head.sr_state_json!,
        };
  return { state: runStateFrom(s, runId, head, [[stepRunId, stepRun]]), chain: head?.chain_digest ?? undefined, nowMs: head?.now_ms };
};

/** Each StepRun asked for, with its head row if it has one. */
const runStateFrom = (s: Statements, runId: string, head: HeadRow | undefined, stepRunRows: readonly (readonly [string, StepRunRow | undefined])[]): RunState => {
  if (head === undefined) {
    if (s.runCompacted.get(runId) !== undefined) throw new PreconditionError('run_compacted', `Run ${runId} was compacted (R14.2)`);
    // No Run is an answer only if nothing else says it exists: its stream, its log, a StepRun (R9.3).
    const other = streamHeadsOf(s, runId);
    if (other.stream !== null || other.logEnd !== null || other.stepRunEvents > 0 || other.starts > 0) {
      throw new CorruptRecordError('run', runId, 'the stream, its log, a StepRun or a start barrier exists but the run head is missing');
    }
    return runStateOf(null, []);
  }
  const stepRuns: StepRunState[] = [];
  for (const [id, row] of stepRunRows) {
    if (row === undefined) requireNoLogOfHeadless(runId, id, s.lastStepRunEvent.get(streamNameOf(runId), id) as EventRow | undefined);
    else stepRuns.push(decodeStepRunRow(row));
  }
  const run = decodeRunRow(head, head.stream_version);
  return runStateOf(run, stepRuns);
};

/** The identity values in the order the probes of identities.ts bind them. */
const probeValuesOf = (keys: ReplayKeys): string[] => {
  const values = replayValuesOf(keys);
  return Object.keys(IDENTITY_STORAGE).map((identity) => values[identity as ReplayIdentity]);
};

/** The index rows under these identity values (in the order of probeValuesOf), as the probes of identities.ts return them. */
export interface ProbedIdentities {
  readonly values: readonly string[];
  readonly rows: readonly ReplayIdentityRow[];
}

/** An index row as its probe returns it (raw): identity, value, start_id. */
type IndexCells = [identity: string, value: string, start_id: string];
/**
 * A row of the lookup (raw): a probe's, or a compacted start's identity with its record's
 * digests (R14.2: they stand in for the barrier), run_id set only there.
 */
type LookupCells = [identity: ReplayIdentity, value: string, start_id: string, run_id: string | null, command_digest: string | null, barrier_digest: string | null, compaction_digest: string | null];

/**
 * The index rows with the command digest of the barrier each names, null where that barrier is
 * missing: what a LEFT JOIN on the barrier gives, one barrier read per start named (an exact
 * replay's seven rows name one). `known`: a barrier row already read in this transaction.
 */
const withDigests = (s: Statements, cells: readonly IndexCells[], known?: BarrierRow): (Omit<ReplayIdentityRow, 'command_digest'> & { command_digest: string | null })[] => {
  const digests = new Map<string, string | null>();
  if (known !== undefined) digests.set(known.start_id, known.command_digest);
  return cells.map(([identity, value, start_id]) => {
    let digest = digests.get(start_id);
    if (digest === undefined) {
      digest = (s.commandDigest.get(start_id) as string | undefined) ?? null;
      digests.set(start_id, digest);
    }
    return { identity: identity as ReplayIdentity, value, start_id, command_digest: digest };
  });
};

/**
 * R3.1: every identity of the command through the key that holds it, one statement. `probed`,
 * when given, receives what was probed: the lookup and the barrier read's probes are the same
 * statement, so a barrier read later in the same transaction, with nothing written in between,
 * reuses these rows for the values it would probe again (readBarrier).
 */
export const lookupReplay = (s: Statements, keys: ReplayKeys, probed?: { current?: ProbedIdentities }): ReplayHits => {
  const values = probeValuesOf(keys);
  const replay = replayValuesOf(keys);
  const all = s.lookup.all(...values, JSON.stringify(REPLAY_IDENTITIES.map((identity) => [identity, replay[identity]]))) as LookupCells[];
  const rows = withDigests(s, all.filter((c) => c[3] === null) as unknown as IndexCells[]);
  const hits = noReplayHits() as Record<ReplayIdentity, ReplayHit[]>;
  for (const r of rows) {
    if (!(REPLAY_IDENTITIES as readonly string[]).includes(r.identity)) throw new CorruptRecordError('replay index', r.value, `unknown identity ${r.identity}`);
    if (r.command_digest === null) throw new CorruptRecordError('replay index', r.value, `names start ${r.start_id}, which has no barrier`);
    hits[r.identity] = [...hits[r.identity], { startId: r.start_id, commandDigest: r.command_digest }];
  }
  for (const [identity, , start_id, run_id, command_digest, barrier_digest, compaction_digest] of all) {
    if (run_id === null) continue;
    hits[identity] = [...hits[identity], { startId: start_id, commandDigest: command_digest!, compacted: { runId: run_id, barrierDigest: barrier_digest!, compactionDigest: compaction_digest ?? '' } }];
  }
  if (probed !== undefined) probed.current = { values, rows: rows as ProbedIdentities['rows'] };
  return hits;
};

/** The index rows under the barrier's own identity values: the lookup's when it probed exactly these values, else probed now. */
const identityRowsOf = (s: Statements, barrier: BarrierRow, values: readonly string[], probed: ProbedIdentities | undefined): ProbedIdentities['rows'] => {
  if (probed !== undefined && probed.values.length === values.length && probed.values.every((v, i) => v === values[i])) return probed.rows;
  return withDigests(s, s.identitiesOfStart.all(...values) as IndexCells[], barrier) as ProbedIdentities['rows'];
};

/** A row of SELECT_START_EVENTS (raw), named. */
const eventRowOf = (c: readonly unknown[]): EventRow =>
  ({ stream_id: c[0], stream_position: c[1], event_id: c[2], event_type: c[3], data_json: c[4], committed_at_ms: c[5] }) as EventRow;

/** The row each table of SELECT_BARRIER_WITH_FACTS fills. */
const FACT_TABLES = {
  tool_execution_start_barriers: 'barrier',
  security_audit_events: 'audit',
  trace_anchors: 'trace',
  audit_receipts: 'receipt',
  step_run_mutations: 'mutation',
} as const;
type FactRows = { -readonly [K in (typeof FACT_TABLES)[keyof typeof FACT_TABLES]]?: Record<string, unknown> };

/** Which cell goes to which row under which name, read once from the statement's column metadata. */
const layouts = new WeakMap<Statements['barrierWithFacts'], readonly { row: keyof FactRows; name: string }[]>();
const layoutOf = (statement: Statements['barrierWithFacts']) => {
  let layout = layouts.get(statement);
  if (layout === undefined) {
    layout = statement.columns().map((c) => {
      const row = FACT_TABLES[c.table as keyof typeof FACT_TABLES];
      if (row === undefined) throw new Error(`the barrier read returned a column of ${c.table}`);
      return { row, name: c.name };
    });
    layouts.set(statement, layout);
  }
  return layout;
};

/**
 * The barrier row and the four fact rows it names, in one statement: each row as its own
 * `SELECT *` would return it, and a fact row the LEFT JOIN did not find (all its cells NULL:
 * every row has a NOT NULL key) undefined.
 */
const barrierWithFacts = (s: Statements, startId: string): FactRows | undefined => {
  const cells = s.barrierWithFacts.get(startId) as unknown[] | undefined;
  if (cells === undefined) return undefined;
  const rows: FactRows = {};
  const found = new Set<keyof FactRows>();
  layoutOf(s.barrierWithFacts).forEach(({ row, name }, i) => {
    const value = cells[i];
    (rows[row] ??= {})[name] = value;
    if (value !== null) found.add(row);
  });
  for (const row of Object.keys(rows) as (keyof FactRows)[]) if (!found.has(row)) delete rows[row];
  return rows;
};

/** R5.3: every row a barrier binds, re-derived from the event log by checkStartRows. */
export const readBarrier = (s: Statements, startId: string, keys?: EvidenceKeyring, probed?: ProbedIdentities): StoredBarrier | null => {
  const rows = barrierWithFacts(s, startId);
  const barrier = rows?.barrier as BarrierRow | undefined;
  if (rows === undefined || barrier === undefined) {
    // No barrier under this id is an answer only if nothing else claims the start exists (R9.3).
    const { indexed, mutations, logged } = s.indexNamesStart.get({ start_id: startId }) as { indexed: number; mutations: number; logged: number };
    return requireNoTraceOfStart(startId, indexed, mutations, logged);
  }
  // The five events around the RunEvent the barrier names hold the one copy of every record's
  // JSON; the probes are the identity values the barrier mirrors.
  const events = (s.startEvents.all(barrier.run_event_id, streamNameOf(barrier.run_id)) as unknown[][]).map(eventRowOf);
  // On an exact replay these are the values the lookup just probed in this transaction (probed).
  const identityRows = identityRowsOf(s, barrier, probeValuesOf(replayKeysOfBarrierRow(barrier)), probed);
  const verified = checkStartRows({
    barrier,
    audit: rows.audit as never,
    trace: rows.trace as never,
    receipt: rows.receipt as never,
    mutation: rows.mutation as never,
    events,
    identities: identityRows,
  });
  return keys === undefined ? verified : keys.verify(verified, s.evidenceMacs.all(startId) as EvidenceMacRow[]);
};

/** R5.4: the barrier of one attempt, by its unique attempt key. */
export const readBarrierOfAttempt = (s: Statements, runId: string, stepRunId: string, startedStepRunVersion: number, keys?: EvidenceKeyring): StoredBarrier | null => {
  const attempt = attemptValue(runId, stepRunId, startedStepRunVersion);
  // the attempt's key is the barrier's own: one list, both sides of the agreement
  const starts = (s.attempt.all(runId, stepRunId, startedStepRunVersion) as { start_id: string }[]).map((r) => r.start_id);
  const startId = agreedAttemptStart(attempt, starts, starts);
  if (startId === undefined) return requireAttemptNotInLog(attempt, stepRunId, startedStepRunVersion, s.eventsOfType.all(streamNameOf(runId), 'StepRunStarted') as EventRow[]);
  const found = readBarrier(s, startId, keys);
  if (found === null) throw new CorruptRecordError('replay index', attempt, `attempt names start ${startId}, which has no barrier`);
  return found;
};

/** The Run's first event and one StepRun's events in version order: what its head must fold to (requireHeadIsItsLog). */
export const stepRunLogOf = (s: Statements, runId: string, stepRunId: string): [runCreated: EventRow | undefined, log: EventRow[]] => {
  const [runCreated, ...log] = s.stepRunLog.all(streamNameOf(runId), streamNameOf(runId), stepRunId) as EventRow[];
  return [runCreated, log];
};

/** The heads of `run-<runId>` and where its log ends, in one statement (agreedStreamVersion). */
export const streamHeadsOf = (s: Statements, runId: string): StreamHeads => {
  const r = s.streamHeads.get({ stream: streamNameOf(runId), run: runId }) as { stream: number | null; run: number | null; step_run_events: number; starts: number; log_end: number | null };
  return { stream: r.stream, run: r.run, stepRunEvents: r.step_run_events, starts: r.starts, logEnd: r.log_end };
};

/** Every event of `run-<runId>`, decoded, in order, whole and matching the stream and Run heads (R9.3). */
export const readStream = (s: Statements, runId: string, keys?: EvidenceKeyring): readonly StoredEvent[] => {
  const stream = streamNameOf(runId);
  const events = wholeStream(stream, streamHeadsOf(s, runId), s.streamEvents.all(stream, 1, Number.MAX_SAFE_INTEGER) as (EventRow & { global_position: number })[]);
  if (keys !== undefined && events.length > 0) requireSealedSpan(keys, stream, readSealedSpan(s, stream, 1, events.length), 1, events.length);
  return events;
};
