import type { Pool, PoolClient } from 'pg';
import { PreconditionError, REPLAY_IDENTITIES, buildStartFactsWithJson, replayKeysOf, streamNameOf, type DecodedStartCommand, type ReplayHit, type ReplayHits, type ReplayIdentity, noReplayHits, type RunState } from '../../domain';
import type { StartStepHook } from '../../application/authority';
import type { PrepareResult, StoredBarrier } from '../../domain/records';
import type { EvidenceKeyring } from '../../application/evidenceKeys';
import { existingBarrierOf, refuseUnknownStart } from '../../application/startProtocol';
import { START_WRITE_STEPS, planStartWrite, type StartWrite } from '../../application/startWritePlan';
import { replayValuesOf, type ReplayIdentityRow } from '../../projections/rows';
import { SQLSTATE, isRetryable, isUniqueViolation, mapPgError, sqlStateOf, unavailableReasonOf } from './errors';
import { paramOf } from './identities';
import { run, type Queryable } from './query';
import { macRowsOfRead, readBarrier, requireNoTraceOfRun, runStateAtLogEnd, verifyBarrierRow, type RunStateColumns } from './reads';
import { PENDING_CLOCK, PREPARED_OUT_OF_STEP, resyncPrepared, roundTripText, setLocalTimeouts, type Part } from './roundTripSql';
import { HitTupleCodec, PgInt, decodeRow, decodeRows } from './rowCodecs';
import * as SQL from './sql';
import { INSERT_START_SEALS, headSpanOfRead, sealParams, type PostgresSealer } from './postgresSeals';
import { requireSealedHead, sealEvents, startEventCells } from '../../application/eventSeals';
import { checkCounts, resolveUniqueViolation } from './startWrite';
import { takeGateAlone, type AttemptBudget, type PostgresTimeouts, type PostgresTransactions } from './transactions';

// The `batched` start on PostgreSQL in two round trips, an exact replay in one (R3, R5.2):
//
// 1. One unlocked read statement (READ_START): the replay lookup, the Run, its stream head and
//    the StepRun, and the barrier rows when the lookup hit. An exact replay is answered from it,
//    verified as every read is (R5.3, R9.4); drift is a typed conflict (R4.3). Outside any
//    transaction it takes no SSI predicate lock, so starts of unrelated Runs never meet there.
// 2. One write query (roundTripSql.ts): SERIALIZABLE, the timeouts SET LOCAL, the Run turn
//    taken without waiting and the Run version the decision was made on compared (pg-0045),
//    the batched write of R3.3 .. R3.7 (the heads moved by the event trigger), the keyed seal
//    when configured, all one implicit transaction that commits when the query ends.
//
// When another writer of the Run was first (its turn busy, or the Run moved since the read),
// nothing was written, and the start goes on under the turn (`underTurn`: the transaction that
// takes the Run's turn first, waiting for it outside any transaction, bounded by lock_timeout
// per wait, and decides while holding it), so writers that keep meeting on one Run decide each
// start once instead of once per lost race. Every write transaction counts, a lost turn
// included (R13.1): at most 1 + maxRetries in all, 40001/40P01 retried and a 23505 answered by
// a fresh lookup (R4.2, R4.3) on the same budget, within the operation's deadline.
//
// With a fault-injection hook (specs), the same statements run with the transaction held
// open between them (BEGIN .. turn, hook, write, hooks, COMMIT) so that a hook can abort it.

export interface RoundTripContext {
  readonly pool: Pool;
  readonly timeouts: PostgresTimeouts;
  readonly tx: PostgresTransactions;
  readonly keys: EvidenceKeyring | undefined;
  /** Keyed only: stores the seal origin before the authority's first keyed write (postgresSeals.ts). */
  readonly sealer: PostgresSealer | undefined;
  readonly hook: StartStepHook | undefined;
  /** `requireSynchronousStandby`: the write transaction first checks a synchronous standby is attached (pg-0065). */
  readonly requireSyncStandby: boolean;
  /**
   * A start that lost the Run's turn goes on under the turn: the transaction that takes the turn
   * first, waiting for it outside, and decides while holding it (transactions.ts). A Run whose
   * writers keep meeting then decides each start once, not once per lost race.
   */
  readonly underTurn: (decoded: DecodedStartCommand, budget: AttemptBudget, busy: boolean) => Promise<PrepareResult>;
}

/** What the first round trip read: the replay hits, and the row itself (it holds the Run state only when there are no hits: a new start). */
export interface StartRead {
  readonly hits: ReplayHits;
  /** The hits that are also rows of the barrier's identity probes (sql.ts READ_START): sent once, read for both. */
  readonly probed: readonly ReplayIdentityRow[];
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
  const probed: ReplayIdentityRow[] = [];
  for (const [identity, value, start_id, command_digest, isProbe] of decodeRows(HitTupleCodec, row.hits, 'replay index', c.startId)) {
    hits[identity] = [...hits[identity], { startId: start_id, commandDigest: command_digest }];
    if (isProbe) probed.push({ identity, value, start_id, command_digest });
  }
  return { hits, probed, row };
};

/**
 * R4.2 from round trip 1 alone: the stored barrier, verified with its MAC when keyed; null: a new
 * start. Drift is confirmed by the barrier it names, which `q` reads (a round trip of its own).
 */
export const existingOfRead = (read: StartRead, decoded: DecodedStartCommand, keys: EvidenceKeyring | undefined, q: Queryable): Promise<StoredBarrier | null> =>
  existingBarrierOf(
    {
      readBarrier: async (startId) => {
        const verified = verifyBarrierRow(read.row, startId, read.probed);
        return keys === undefined || verified === null ? verified : keys.verify(verified, macRowsOfRead(read.row, startId));
      },
    },
    decoded,
    read.hits,
    { readBarrier: (startId) => readBarrier(q, startId, keys) },
  );

/** The write plan's statements: the turn and its expectation, the batched write, the seal when keyed. */
const partsOf = (plan: StartWrite, keys: EvidenceKeyring | undefined): { turn: Part; writes: Part[] } => ({
  // alone false: a last attempt already holds the start gate exclusively (takeGateAlone)
  turn: { sql: SQL.TAKE_START_TURN, params: { run_id: plan.runId, expected_version: plan.runCas.expected, alone: false } },
  writes: [
    { sql: SQL.START_BATCHED_STATEMENT, params: SQL.startParams(plan, START_WRITE_STEPS) },
    // keyed (R9.4): the barrier's MAC and the seal of the start's five events, one statement
    ...(keys === undefined ? [] : [{ sql: INSERT_START_SEALS, params: { start_id: plan.startId, ...keys.seal(plan.result), ...sealParams(sealEvents(keys, plan.streamId, startEventCells(plan))) } }]),
  ],
});

type Results = { rows: Record<string, unknown>[] }[];
const clockOf = (result: Results[number] | undefined, runId: string): number => decodeRow(PgInt, result?.rows[0]?.now_ms, 'transaction clock', runId);

/**
 * Round trip 2: an implicit transaction of one query string. With a hook, the same statements
 * with the transaction held open between them; on a last attempt, after the round trip that
 * takes the start gate before the snapshot (R9.5), in the transaction that round trip opened.
 */
const write = async (client: PoolClient, ctx: RoundTripContext, plan: StartWrite, open: { value: boolean }, alone: boolean): Promise<StoredBarrier> => {
  const { turn, writes } = partsOf(plan, ctx.keys);
  const guard = ctx.requireSyncStandby ? [SQL.REQUIRE_SYNC_STANDBY] : [];
  const timeouts = [...setLocalTimeouts(ctx.timeouts), ...guard];
  // a last attempt's transaction is open from here, with the gate or without it (no second BEGIN)
  if (alone) {
    await takeGateAlone(client, ctx.timeouts);
    open.value = true;
  }
  let nowMs: number;
  let counts: Results[number] | undefined;
  if (ctx.hook === undefined) {
    const q = roundTripText(client, open.value ? guard : ['SET TRANSACTION ISOLATION LEVEL SERIALIZABLE', ...timeouts], [turn, ...writes]);
    const results = (await client.query(q.text)) as unknown as Results;
    nowMs = clockOf(results[q.resultAt[0]!], plan.runId);
    counts = results[q.resultAt[1]!];
  } else {
    const begin = roundTripText(client, open.value ? guard : [SQL.BEGIN_SERIALIZABLE, ...timeouts], [turn]);
    open.value = true;
    const begun = (await client.query(begin.text)) as unknown as Results | Results[number];
    nowMs = clockOf(Array.isArray(begun) ? begun[begin.resultAt[0]!] : begun, plan.runId);
    await ctx.hook('lock');
    const rest = roundTripText(client, [], writes);
    const results = (await client.query(rest.text)) as unknown as Results | Results[number];
    counts = Array.isArray(results) ? results[rest.resultAt[0]!] : results;
  }
  checkCounts(plan, counts?.rows ?? []);
  if (ctx.hook !== undefined) {
    for (const step of START_WRITE_STEPS) await ctx.hook(step);
    await ctx.hook('beforeCommit');
  }
  if (open.value) {
    await client.query(SQL.COMMIT);
    open.value = false;
  }
  return { ...plan.result, committedAtMs: nowMs };
};

/** Q3T01 (pg-0045): another writer of the Run was first; `busy` when it still holds the turn. */
const turnLost = (e: unknown): 'busy' | 'moved' | undefined => {
  if (sqlStateOf(e) !== SQLSTATE.turnLost) return undefined;
  return (e as { detail?: string }).detail === 'busy' ? 'busy' : 'moved';
};

/** `prepare` in `batched` mode: round trip 1, decide, round trip 2; again only as the header says. */
export const prepareInRoundTrips = async (ctx: RoundTripContext, decoded: DecodedStartCommand, budget: AttemptBudget): Promise<PrepareResult> => {
  const runId = decoded.command.stepRun.runId;
  let client: PoolClient;
  try {
    client = await ctx.pool.connect();
  } catch (e) {
    throw mapPgError(e);
  }
  let broken: unknown;
  const onError = (err: Error) => {
    broken ??= err;
  };
  client.on('error', onError);
  const open = { value: false };
  let resynced = false;
  /** The turn was lost to a writer that still holds it (not only to one that moved the Run and left). */
  let busy = false;
  try {
    for (;;) {
      const read = await readStart(client, decoded, ctx.keys !== undefined);
      const existing = await existingOfRead(read, decoded, ctx.keys, client);
      if (existing !== null) return { outcome: 'existing', barrier: existing };
      ctx.tx.spend(budget);
      try {
        await ctx.hook?.('lookup');
        const state = stateOfRead(read, decoded);
        const { facts, json } = buildStartFactsWithJson(decoded, state);
        const plan = planStartWrite(facts, state, PENDING_CLOCK, json);
        // keyed: the head this start follows is sealed (R9.4), read with the Run; the write's Run CAS keeps it the head
        if (ctx.keys !== undefined) requireSealedHead(ctx.keys, plan.streamId, headSpanOfRead(read.row, plan.streamId), plan.events.evidence[0]!.position - 1);
        await ctx.sealer?.ensureOrigin(client);
        return { outcome: 'created', barrier: await write(client, ctx, plan, open, ctx.tx.isLastAttempt(budget)) };
      } catch (e) {
        if (open.value && broken === undefined && unavailableReasonOf(e) === undefined) {
          open.value = false;
          await client.query(SQL.ROLLBACK);
        }
        const lost = turnLost(e);
        if (lost !== undefined) {
          busy = lost === 'busy';
          // the write transaction was spent (R13.1: lost turns count); on under the turn if one is left
          ctx.tx.requireAttemptLeft(budget, `the Run's turn was taken by another writer (${lost})`);
          break; // on under the turn, once this connection is back in the pool
        }
        if (!resynced && PREPARED_OUT_OF_STEP.has(sqlStateOf(e) ?? '')) {
          resynced = true; // the connection's session was not what this module recorded: counted all the same
          await resyncPrepared(client);
          continue;
        }
        if (isUniqueViolation(e)) {
          ctx.tx.spend(budget); // answered on the same budget (R9.5)
          return await resolveUniqueViolation(client, decoded, e, ctx.keys);
        }
        if (e instanceof PreconditionError) {
          if (e.reason === 'run_not_found') await requireNoTraceOfRun(client, decoded.command.stepRun.runId);
          await refuseUnknownStart({ readBarrier: (id) => readBarrier(client, id, ctx.keys) }, decoded.command.startId, e);
        }
        if (!isRetryable(e)) throw e;
        await ctx.tx.afterRetryable(budget, e);
      }
    }
  } catch (e) {
    if (unavailableReasonOf(e) !== undefined) broken ??= e;
    if (open.value && broken === undefined) {
      try {
        await client.query(SQL.ROLLBACK);
      } catch (rollbackError) {
        broken = rollbackError;
      }
    }
    // The server ends a session idle in a transaction too long (only with a hook holding it open).
    if (sqlStateOf(e) === undefined && sqlStateOf(broken) === SQLSTATE.idleInTransactionTimeout) throw mapPgError(broken);
    throw mapPgError(e);
  } finally {
    client.off('error', onError);
    client.release(broken instanceof Error ? broken : broken === undefined ? undefined : true);
  }
  return ctx.underTurn(decoded, budget, busy);
};
