import {
  CorruptRecordError,
  REPLAY_IDENTITIES,
  noReplayHits,
  replayKeysOfBarrier,
  streamNameOf,
  type ReplayHit,
  type ReplayHits,
  type ReplayIdentity,
  type ReplayKeys,
  type RunState,
  type StartBarrierRecord,
} from '../../domain';
import { replayValuesOf, type BarrierRow, type ReplayIdentityRow, type RunRow, type StepRunRow } from '../../projections/rows';
import { decodeRunRow, decodeStepRunRow, runStateOf } from '../../projections/runState';
import { startEventPositions, type EventRow } from '../../projections/verifyRows';
import { checkStartRows, checkedStoredEventOf } from '../../projections/checkRows';
import type { StoredBarrier, StoredEvent } from '../../application/authority';
import { IDENTITY_STORAGE } from './identities';
import type { Statements } from './statements';

// The SQLite reads, synchronous on the authority's one connection, always inside one of its
// transactions (a snapshot). Every row is re-verified before it is returned (R5.3).

export const loadRunState = (s: Statements, runId: string, stepRunIds: readonly string[]): RunState => {
  const head = s.runHead.get(streamNameOf(runId), runId) as (RunRow & { stream_version: number | null }) | undefined;
  if (head === undefined) {
    const stream = s.streamVersion.get(streamNameOf(runId)) as { version: number } | undefined;
    if (stream !== undefined) throw new CorruptRecordError('run', runId, 'stream exists but its run head is missing');
    return runStateOf(null, []);
  }
  const run = decodeRunRow(head, head.stream_version);
  const stepRuns = stepRunIds
    .map((id) => s.stepRun.get(runId, id) as StepRunRow | undefined)
    .filter((r): r is StepRunRow => r !== undefined)
    .map(decodeStepRunRow);
  return runStateOf(run, stepRuns);
};

/** The identity values in the order the probes of identities.ts bind them. */
const probeValuesOf = (keys: ReplayKeys): string[] => {
  const values = replayValuesOf(keys);
  return Object.keys(IDENTITY_STORAGE).map((identity) => values[identity as ReplayIdentity]);
};

/** R3.1: every identity of the command through the unique replay index, one statement. */
export const lookupReplay = (s: Statements, keys: ReplayKeys): ReplayHits => {
  const rows = s.lookup.all(...probeValuesOf(keys)) as ReplayIdentityRow[];
  const hits = noReplayHits() as Record<ReplayIdentity, ReplayHit[]>;
  for (const r of rows) {
    if (!(REPLAY_IDENTITIES as readonly string[]).includes(r.identity)) throw new CorruptRecordError('replay index', r.value, `unknown identity ${r.identity}`);
    hits[r.identity] = [...hits[r.identity], { startId: r.start_id, commandDigest: r.command_digest }];
  }
  return hits;
};

/** R5.3: every row a barrier binds, re-derived from the event log by checkStartRows. */
export const readBarrier = (s: Statements, startId: string): StoredBarrier | null => {
  const barrier = s.barrier.get(startId) as BarrierRow | undefined;
  if (barrier === undefined) return null;
  let sequence = 0;
  let probes: string[] = [];
  try {
    const b = JSON.parse(barrier.barrier_json) as StartBarrierRecord;
    sequence = Number(b.runEvent?.runEventSequence ?? 0);
    probes = probeValuesOf(replayKeysOfBarrier(b));
  } catch {
    // verifyStartRows reports the undecodable barrier with its own message.
  }
  const positions = startEventPositions(sequence);
  const events = sequence > 3 ? (s.streamEvents.all(streamNameOf(barrier.run_id), positions[0], positions[4]) as EventRow[]) : [];
  const identityRows = probes.length > 0 ? (s.identitiesOfStart.all(...probes, startId) as (ReplayIdentityRow & { row_id: number })[]) : [];
  const unique = [...new Map(identityRows.map((r) => [r.row_id, r])).values()].map(({ row_id: _, ...r }) => r);
  return checkStartRows({
    barrier,
    audit: s.audit.get(barrier.audit_event_id) as never,
    trace: s.trace.get(barrier.trace_id) as never,
    receipt: s.receipt.get(barrier.audit_receipt_id) as never,
    mutation: s.mutation.get(barrier.mutation_id) as never,
    events,
    identities: unique,
  });
};

/** R5.4: the barrier of one attempt, through the replay index. */
export const readBarrierOfAttempt = (s: Statements, attempt: string): StoredBarrier | null => {
  const rows = s.attempt.all(attempt) as { start_id: string }[];
  if (rows.length > 1) throw new CorruptRecordError('replay index', attempt, `attempt is bound to ${rows.length} barriers`);
  if (rows.length === 0) return null;
  const found = readBarrier(s, rows[0]!.start_id);
  if (found === null) throw new CorruptRecordError('replay index', attempt, `attempt names start ${rows[0]!.start_id}, which has no barrier`);
  return found;
};

export const readStream = (s: Statements, runId: string): readonly StoredEvent[] =>
  (s.streamEvents.all(streamNameOf(runId), 1, Number.MAX_SAFE_INTEGER) as (EventRow & { global_position: number })[]).map((r) => checkedStoredEventOf(r));
