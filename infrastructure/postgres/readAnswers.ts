import type { Pool, PoolClient } from 'pg';
import { ConcurrencyExhaustedError, type DecodedStartCommand, type LifecycleCommand } from '../../domain';
import type { PrepareResult } from '../../domain/records';
import type { EvidenceKeyring } from '../../application/evidenceKeys';
import { runLifecycleTransaction } from '../../application/lifecycleProtocol';
import { existingBarrierOf } from '../../application/startProtocol';
import { mapPgError, unavailableReasonOf } from './errors';
import { run, type Queryable } from './query';
import { loadRunState, readBarrier, stepRunLogOf } from './reads';
import { existingOfRead, readStart } from './startRead';
import type { LookupBeforeBegin } from './startWrite';
import * as SQL from './sql';
import { AnsweredByRead, msLeft, type AttemptBudget, type PostgresTimeouts } from './transactions';

// R13.1, R4.2, R4.3: answers that need no write are given from a read, never from a write
// transaction. Racers on one Run (exact replays of one command, starts of one StepRun, CreateRun
// of one Run) lose the Run's turn to the writer that was first; what is left for them to say
// (`existing`, a typed conflict, `run_exists`) is in the store once that writer has committed,
// so a read answers it and no write transaction is spent on it. A read is not a write
// transaction: the bound of 1 + 3 counts BEGINs of write transactions only.
//
// Each answer is decided on committed rows that never change once written (replay identities,
// barriers) or on one consistent snapshot of the Run (a refusal writes nothing, so it is
// linearised at that snapshot); anything that would write goes on to a write transaction.

/**
 * R4.2/R4.3 from the replay hits read before BEGIN (transactions.ts `BeforeBegin`): an exact
 * replay is `existing` and drift the typed conflict, answered without BEGIN; no hit: the hits
 * go on to the transaction.
 */
export const startAnswerBeforeBegin = async (q: Queryable, decoded: DecodedStartCommand, lookup: LookupBeforeBegin, keys: EvidenceKeyring | undefined): Promise<LookupBeforeBegin | AnsweredByRead<PrepareResult>> => {
  const existing = await existingBarrierOf({ readBarrier: (id) => readBarrier(q, id, keys) }, decoded, lookup.hits);
  return existing === null ? lookup : new AnsweredByRead<PrepareResult>({ outcome: 'existing', barrier: existing });
};

/** The start's answer on a read alone (the first round trip of roundTripStart.ts): `existing`, a thrown conflict, or null (it would write). */
export const startAnswerOnRead = async (pool: Pool, decoded: DecodedStartCommand, keys: EvidenceKeyring | undefined): Promise<PrepareResult | null> => {
  const read = await readStart(pool, decoded, keys !== undefined);
  const existing = await existingOfRead(read, decoded, keys, pool);
  return existing === null ? null : { outcome: 'existing', barrier: existing };
};

/** Raised by the read-only unit of work where the command would append: it needs a write transaction. */
const WOULD_WRITE = Symbol('would write');

/**
 * A lifecycle command decided on one REPEATABLE READ READ ONLY snapshot with the shared protocol
 * (the same decision and the same R9.3 checks of a refusal as in the write transaction): a
 * refusal (run_exists, step_run_exists, ...) is thrown from here; a command that would append
 * returns, to go on to its write transaction. The connection is left outside any transaction.
 */
export const lifecycleRefusalOnRead = async (client: Queryable, command: LifecycleCommand, keys: EvidenceKeyring | undefined, timeouts: PostgresTimeouts): Promise<void> => {
  await client.query(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL statement_timeout = ${Math.trunc(timeouts.statementMs)}`);
  try {
    await runLifecycleTransaction(
      {
        lockForLifecycle: (runId, stepRunId) => loadRunState(client, runId, stepRunId),
        readBarrier: (startId) => readBarrier(client, startId, keys),
        stepRunLog: (runId, stepRunId) => stepRunLogOf(client, runId, stepRunId),
        appendLifecycle: () => Promise.reject(WOULD_WRITE),
      },
      command,
    );
  } catch (e) {
    if (e !== WOULD_WRITE) {
      await client.query(SQL.ROLLBACK).catch(() => undefined); // the refusal (or the failure) is the answer
      throw e;
    }
  }
  await client.query(SQL.ROLLBACK);
};

/** lifecycleRefusalOnRead on a connection of the pool; null when the command would append. */
export const lifecycleRefusalOnPool = async (pool: Pool, command: LifecycleCommand, keys: EvidenceKeyring | undefined, timeouts: PostgresTimeouts): Promise<null> => {
  let client: PoolClient;
  try {
    client = await pool.connect();
  } catch (e) {
    throw mapPgError(e);
  }
  let broken: unknown;
  const onError = (err: Error) => {
    broken ??= err; // a pool the caller owns has no listener of ours on a checked-out connection
  };
  client.on('error', onError);
  try {
    await lifecycleRefusalOnRead(client, command, keys, timeouts);
    return null;
  } catch (e) {
    if (unavailableReasonOf(e) !== undefined) broken ??= e;
    throw e;
  } finally {
    client.off('error', onError);
    client.release(broken instanceof Error ? broken : broken === undefined ? undefined : true);
  }
};

/**
 * R13.1: before an operation gives up on its write budget, one last read. A racer whose last
 * turn went to the writer that was first waits for that writer to end (outside any
 * transaction, within lock_timeout and the deadline), then `answer` reads: what it returns or
 * throws is the operation's answer; null (the operation would still have to write) leaves
 * CONCURRENCY_EXHAUSTED as it was, nothing written.
 */
export const answeredOnExhaustion = async <T>(
  operation: Promise<T>,
  wait: { readonly pool: Pool; readonly runId: string; readonly timeouts: PostgresTimeouts; readonly budget: AttemptBudget },
  answer: () => Promise<T | null>,
): Promise<T> => {
  try {
    return await operation;
  } catch (e) {
    if (!(e instanceof ConcurrencyExhaustedError) || Date.now() >= wait.budget.deadlineAt) throw e;
    try {
      await run(wait.pool, SQL.AWAIT_RUN_TURN, { run_id: wait.runId, lock_timeout_ms: Math.min(wait.timeouts.lockMs, msLeft(wait.budget)) });
    } catch {
      throw e; // the turn stayed busy: the budget's error stands
    }
    let answered: T | null;
    try {
      answered = await answer();
    } catch (refusal) {
      throw mapPgError(refusal);
    }
    if (answered === null) throw e;
    return answered;
  }
};
