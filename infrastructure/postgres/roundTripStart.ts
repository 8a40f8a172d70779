import type { Pool, PoolClient } from 'pg';
import type { DecodedStartCommand } from '../../domain';
import type { StartStep, StartStepHook } from '../../application/authority';
import type { PrepareResult } from '../../domain/records';
import type { EvidenceKeyring } from '../../application/evidenceKeys';
import type { InvocationPlanRow } from '../../application/invocationPlans';
import { runStartTransaction, type StartUnitOfWork } from '../../application/startProtocol';
import { CLOCK_AT_WRITE, START_WRITE_STEPS, type StartWrite } from '../../application/startWritePlan';
import { requireSealedHead, sealEvents, startEventCells } from '../../application/eventSeals';
import { SQLSTATE, isRetryable, isUniqueViolation, mapPgError, sqlStateOf, unavailableReasonOf } from './errors';
import { readBarrier, requireNoTraceOfRun } from './reads';
import { PREPARED_OUT_OF_STEP, resyncPrepared, roundTripText, setLocalTimeouts, type Part } from './roundTripSql';
import { PgInt, decodeRow } from './rowCodecs';
import * as SQL from './sql';
import { INSERT_START_SEALS, headSpanOfRead, sealParams, type PostgresSealer } from './postgresSeals';
import { INSERT_PLAN, planParams } from './postgresPlans';
import { barrierOfRead, readHasBarrierRows, readStart, stateOfRead, type StartRead } from './startRead';
import { checkCounts, resolveUniqueViolation } from './startWrite';
import { takeGateAlone, type AttemptBudget, type PostgresTimeouts, type PostgresTransactions } from './transactions';

// The `batched` start on PostgreSQL: the shared start protocol (application/startProtocol.ts)
// over a unit of work whose read and write are one round trip each (R3, R5.2), so a new start
// costs two round trips and an exact replay one.
//
// 1. lookupReplay: one unlocked read statement (startRead.ts READ_START): the replay lookup, the
//    Run, its stream head and the StepRun, and the barrier rows when the lookup hit, from which
//    an exact replay is answered.
// 2. writeStart: one write query (roundTripSql.ts): SERIALIZABLE, the timeouts SET LOCAL, the
//    Run turn taken without waiting and the Run version the decision was made on compared
//, the batched write of R3.3 .. R3.7 (the heads moved by the event trigger), the
//    keyed seal when configured and the sealed invocation plan when given (R12.2), all one
//    implicit transaction that commits when the query ends. The server stamps the clock
//    (R3.10), so the protocol plans with CLOCK_AT_WRITE and the write returns the clock.
//
// When another writer of the Run was first (its turn busy, or the Run moved since the read),
// nothing was written, and the start goes on under the turn (`underTurn`: the transaction that
// takes the Run's turn first, waiting for it outside any transaction, bounded by lock_timeout
// per wait, and decides while holding it). Every write transaction counts, a lost turn included
// (R13.1): at most 1 + maxRetries in all, 40001/40P01 retried and a 23505 answered by a fresh
// lookup (R4.2, R4.3) on the same budget, within the operation's deadline.
//
// With a fault-injection hook (specs), lockForStart begins the transaction and takes the turn,
// and the write runs in it, held open so that a hook can abort it; this module commits it.

export interface RoundTripContext {
  readonly pool: Pool;
  readonly timeouts: PostgresTimeouts;
  readonly tx: PostgresTransactions;
  readonly keys: EvidenceKeyring | undefined;
  /** Keyed only: stores the seal origin before the authority's first keyed write (postgresSeals.ts). */
  readonly sealer: PostgresSealer | undefined;
  readonly hook: StartStepHook | undefined;
  /** `requireSynchronousStandby`: the write transaction first checks a synchronous standby is attached. */
  readonly requireSyncStandby: boolean;
  /**
   * A start that lost the Run's turn goes on under the turn: the transaction that takes the turn
   * first, waiting for it outside, and decides while holding it (transactions.ts). A Run whose
   * writers keep meeting then decides each start once, not once per lost race.
   */
  readonly underTurn: (decoded: DecodedStartCommand, budget: AttemptBudget, busy: boolean) => Promise<PrepareResult>;
}

type Results = { rows: Record<string, unknown>[] }[];
const clockOf = (result: Results[number] | undefined, runId: string): number => decodeRow(PgInt, result?.rows[0]?.now_ms, 'transaction clock', runId);
/** One result of a query string: pg answers an array for several statements, the result itself for one. */
const resultAt = (results: Results | Results[number], at: number): Results[number] | undefined => (Array.isArray(results) ? results[at] : results);

/** The write's statements after the turn: the batched write, the seal when keyed, the sealed plan when given. */
const writesOf = (plan: StartWrite, keys: EvidenceKeyring | undefined): Part[] => [
  { sql: SQL.START_BATCHED_STATEMENT, params: SQL.startParams(plan, START_WRITE_STEPS) },
  // keyed (R9.4): the barrier's MAC and the seal of the start's five events, one statement
  ...(keys === undefined ? [] : [{ sql: INSERT_START_SEALS, params: { start_id: plan.startId, ...keys.seal(plan.result), ...sealParams(sealEvents(keys, plan.streamId, startEventCells(plan))) } }]),
  ...(plan.invocationPlan === undefined ? [] : [{ sql: INSERT_PLAN, params: planParams(plan.invocationPlan, true) }]),
];

/** The connection's transaction state, shared by the unit of work and the loop that commits or rolls back. */
interface Session {
  readonly client: PoolClient;
  open: boolean;
}

/** The unit of work of one attempt: round trip 1 read by lookupReplay, round trip 2 sent by writeStart. */
const roundTripUnitOfWork = (ctx: RoundTripContext, session: Session, decoded: DecodedStartCommand, budget: AttemptBudget): StartUnitOfWork & { writes(): boolean } => {
  const { client } = session;
  const guard = ctx.requireSyncStandby ? [SQL.REQUIRE_SYNC_STANDBY] : [];
  let read: StartRead | undefined;
  /** With a hook: the clock of the transaction lockForStart began. */
  let begunAtMs: number | undefined;
  /** Whether a last attempt holds the start gate (takeGateAlone): its turn then waits for a moment's holder (ql3.lock_run_head). */
  let alone = false;
  const turnOf = (runId: string, expected: number): Part => ({ sql: SQL.TAKE_START_TURN, params: { run_id: runId, expected_version: expected, alone } });
  /** A last attempt's transaction is open from here, with the gate or without it (no second BEGIN, R9.5). */
  const gateIfLast = async () => {
    if (!ctx.tx.isLastAttempt(budget)) return;
    alone = await takeGateAlone(client, ctx.timeouts, budget);
    session.open = true;
  };
  const head = () => (session.open ? guard : [...setLocalTimeouts(ctx.timeouts), ...guard]);
  return {
    lookupReplay: async () => {
      read = await readStart(client, decoded, ctx.keys !== undefined);
      // no hit: a new start, so a write transaction of the operation follows (R13.1); a replay or a conflict spends none
      if (!readHasBarrierRows(read)) ctx.tx.spend(budget);
      return read.hits;
    },
    writes: () => read !== undefined && !readHasBarrierRows(read),
    // The start's own barrier comes with round trip 1 when the lookup hit; any other read (the
    // holder of a conflict, a start the index does not name) is a statement of its own.
    readBarrier: async (startId) =>
      read !== undefined && startId === decoded.command.startId && readHasBarrierRows(read) ? barrierOfRead(read, startId, ctx.keys) : readBarrier(client, startId, ctx.keys),
    lockForStart: async (runId) => {
      const state = stateOfRead(read!, decoded);
      // no Run head: refused as run_not_found only if nothing else of the Run exists (R9.3)
      if (state.run === null) await requireNoTraceOfRun(client, runId);
      if (ctx.hook !== undefined && state.run !== null) {
        await gateIfLast();
        const begin = roundTripText(client, session.open ? head() : [SQL.BEGIN_SERIALIZABLE, ...head()], [turnOf(runId, state.run.version)]);
        session.open = true;
        begunAtMs = clockOf(resultAt((await client.query(begin.text)) as unknown as Results, begin.resultAt[0]!), runId);
      }
      return state;
    },
    clockMs: async () => CLOCK_AT_WRITE,
    writesAtOnce: true,
    writeStart: async (plan) => {
      // keyed: the head this start follows is sealed (R9.4), read with the Run; the write's Run CAS keeps it the head
      if (ctx.keys !== undefined) requireSealedHead(ctx.keys, plan.streamId, headSpanOfRead(read!.row, plan.streamId), plan.events.evidence[0]!.position - 1);
      await ctx.sealer?.ensureOrigin(client);
      const writes = writesOf(plan, ctx.keys);
      if (begunAtMs !== undefined) {
        const rest = roundTripText(client, [], writes);
        checkCounts(plan, resultAt((await client.query(rest.text)) as unknown as Results, rest.resultAt[0]!)?.rows ?? []);
        return begunAtMs;
      }
      await gateIfLast();
      const q = roundTripText(client, session.open ? head() : ['SET TRANSACTION ISOLATION LEVEL SERIALIZABLE', ...head()], [turnOf(plan.runId, plan.runCas.expected), ...writes]);
      const results = (await client.query(q.text)) as unknown as Results;
      checkCounts(plan, results[q.resultAt[1]!]?.rows ?? []);
      return clockOf(results[q.resultAt[0]!], plan.runId);
    },
  };
};

/** Q3T01: another writer of the Run was first; `busy` when it still holds the turn. */
const turnLost = (e: unknown): 'busy' | 'moved' | undefined => {
  if (sqlStateOf(e) !== SQLSTATE.turnLost) return undefined;
  return (e as { detail?: string }).detail === 'busy' ? 'busy' : 'moved';
};

/** `prepare` in `batched` mode: the start protocol over round trips; again only as the header says. */
export const prepareInRoundTrips = async (ctx: RoundTripContext, decoded: DecodedStartCommand, budget: AttemptBudget, sealed?: InvocationPlanRow): Promise<PrepareResult> => {
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
  const session: Session = { client, open: false };
  let resynced = false;
  /** The turn was lost to a writer that still holds it (not only to one that moved the Run and left). */
  let busy = false;
  try {
    for (;;) {
      try {
        const uow = roundTripUnitOfWork(ctx, session, decoded, budget);
        // A replay is a read outside any transaction: no step of it for a hook to abort, so `lookup` fires only before a write.
        const hook = ctx.hook && ((step: StartStep) => (step === 'lookup' && !uow.writes() ? undefined : ctx.hook!(step)));
        const result = await runStartTransaction(uow, decoded, hook, sealed);
        if (session.open) {
          await client.query(SQL.COMMIT);
          session.open = false;
        }
        return result;
      } catch (e) {
        if (session.open && broken === undefined && unavailableReasonOf(e) === undefined) {
          session.open = false;
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
          resynced = true; // the connection's session was not what roundTripSql.ts recorded: counted all the same
          await resyncPrepared(client);
          continue;
        }
        if (isUniqueViolation(e)) {
          ctx.tx.spend(budget); // answered on the same budget (R9.5)
          return await resolveUniqueViolation(client, decoded, e, ctx.keys);
        }
        if (!isRetryable(e)) throw e;
        await ctx.tx.afterRetryable(budget, e);
      }
    }
  } catch (e) {
    if (unavailableReasonOf(e) !== undefined) broken ??= e;
    if (session.open && broken === undefined) {
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
