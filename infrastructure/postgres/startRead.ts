import type { Pool, PoolClient } from 'pg';
import { REPLAY_IDENTITIES, replayKeysOf, streamNameOf, type DecodedStartCommand, type ReplayHit, type ReplayHits, type ReplayIdentity, noReplayHits, type RunState } from '../../domain';
import type { StoredBarrier } from '../../domain/records';
import type { EvidenceKeyring } from '../../application/evidenceKeys';
import { existingBarrierOf } from '../../application/startProtocol';
import { replayValuesOf } from '../../projections/rows';
import { paramOf } from './identities';
import { run, type Queryable } from './query';
import { macRowsOfRead, readBarrier, runStateAtLogEnd, verifyBarrierRow, type RunStateColumns } from './reads';
import { HitTupleCodec, decodeRows } from './rowCodecs';
import * as SQL from './sql';

// The first round trip of a start on PostgreSQL (sql.ts READ_START): one unlocked statement that
// reads the replay lookup, the Run, its stream head and the StepRun, and the barrier rows when the
// lookup hit. Outside any transaction it takes no SSI predicate lock, so starts of unrelated Runs
// never meet there. An exact replay is answered from it, verified as every read is (R5.3, R9.4).

/** What the first round trip read: the replay hits, and the row itself (it holds the Run state only when there are no hits: a new start). */
export interface StartRead {
  readonly hits: ReplayHits;
  readonly row: Record<string, unknown>;
}

/** The Run state of round trip 1 (R3.2, read without a lock; the write's compare-and-set checks it still holds). */
export const stateOfRead = (read: StartRead, decoded: DecodedStartCommand): RunState =>
  runStateAtLogEnd(read.row as unknown as RunStateColumns, decoded.command.stepRun.runId, decoded.command.stepRun.stepRunId);

/** Each identity's parameter name, made once (a key made per call is a new string to look up every time). */
const IDENTITY_PARAMS = Object.fromEntries(REPLAY_IDENTITIES.map((identity) => [identity, paramOf(identity)])) as Readonly<Record<ReplayIdentity, string>>;

/** Round trip 1: READ_START, or READ_START_KEYED with a keyring, decoded (R3.1, R3.2 without a lock). */
export const readStart = async (q: PoolClient | Pool, decoded: DecodedStartCommand, keyed = false): Promise<StartRead> => {
  const c = decoded.command;
  const keys = replayKeysOf(c);
  const values = replayValuesOf(keys);
  const params: Record<string, unknown> = {};
  for (const identity of REPLAY_IDENTITIES) params[IDENTITY_PARAMS[identity]] = values[identity];
  params['run_id'] = c.stepRun.runId;
  params['stream_id'] = streamNameOf(c.stepRun.runId);
  params['step_run_id'] = c.stepRun.stepRunId;
  params['start_id'] = c.startId;
  const [row] = await run<Record<string, unknown>>(q, keyed ? SQL.READ_START_KEYED : SQL.READ_START, params);
  if (row === undefined) throw new Error('READ_START returned no row');
  const hits = noReplayHits() as Record<ReplayIdentity, ReplayHit[]>;
  for (const [identity, , start_id, command_digest] of decodeRows(HitTupleCodec, row.hits, 'replay index', c.startId)) {
    hits[identity] = [...hits[identity], { startId: start_id, commandDigest: command_digest }];
  }
  return { hits, row };
};

/** The start's own barrier from round trip 1 (read only when the lookup hit), verified with its MAC when keyed. */
export const barrierOfRead = (read: StartRead, startId: string, keys: EvidenceKeyring | undefined): StoredBarrier | null => {
  const verified = verifyBarrierRow(read.row, startId);
  return keys === undefined || verified === null ? verified : keys.verify(verified, macRowsOfRead(read.row, startId));
};

/** Whether round trip 1 read barrier rows: only when its lookup hit (sql.ts READ_START). */
export const readHasBarrierRows = (read: StartRead): boolean => Object.values(read.hits).some((hits) => hits.length > 0);

/**
 * R4.2 from round trip 1 alone: the stored barrier, verified with its MAC when keyed; null: a new
 * start. Drift is confirmed by the barrier it names, which `q` reads (a round trip of its own).
 */
export const existingOfRead = (read: StartRead, decoded: DecodedStartCommand, keys: EvidenceKeyring | undefined, q: Queryable): Promise<StoredBarrier | null> =>
  existingBarrierOf(
    {
      readBarrier: async (startId) => barrierOfRead(read, startId, keys),
    },
    decoded,
    read.hits,
    { readBarrier: (startId) => readBarrier(q, startId, keys) },
  );

