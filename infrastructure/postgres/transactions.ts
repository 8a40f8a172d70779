import { setTimeout as sleep } from 'node:timers/promises';
import type { Pool, PoolClient } from 'pg';
import { ConcurrencyExhaustedError } from '../../domain';
import { SQLSTATE, isRetryable, mapPgError, sqlStateOf, unavailableReasonOf } from './errors';
import { run, type Queryable } from './query';
import { PgInt, decodeRow } from './rowCodecs';
import * as SQL from './sql';

// Transaction and turn handling for the PostgreSQL authority: one short SERIALIZABLE
// transaction per operation, on a pooled connection, that first takes the Run's turn.

export interface PostgresTimeouts {
  /** statement_timeout of every statement of a start or lifecycle transaction (default 5000). */
  readonly statementMs: number;
  /** lock_timeout: how long a start waits for the Run/StepRun row locks (default 2000). */
  readonly lockMs: number;
  /** idle_in_transaction_session_timeout: a stalled client loses its transaction (default 10000). */
  readonly idleInTransactionMs: number;
  /** Client side: how long opening a connection may take before STORE_UNAVAILABLE (default 5000). */
  readonly connectMs: number;
  /**
   * Client side: how long one statement may go unanswered before STORE_UNAVAILABLE and the
   * connection is discarded (default 15000). The server's statement_timeout fires first on a
   * live server; this bound is for a server that stopped answering (frozen, partitioned).
   */
  readonly queryMs: number;
}

/** How many transaction attempts one operation has made so far (R9.5: shared by all of them). */
export interface AttemptBudget {
  attempts: number;
}

/** What one transaction attempt hands its body: the connection and the clock read once (R3.10). */
export interface Tx {
  readonly client: PoolClient;
  readonly nowMs: number;
  /** What the attempt's `beforeBegin` read on this connection just before BEGIN, if anything. */
  readonly before?: unknown;
  /** The Run's version under the turn (null: no such Run yet). */
  readonly turnVersion: number | null;
}

/**
 * A read run on the attempt's connection outside the transaction, just before BEGIN (and again
 * after waiting for the turn). The start's replay lookup goes here: a probe of the unique
 * replay index under SERIALIZABLE takes a predicate lock on the index page, and on a small
 * index every start of every Run shares that page, so starts of unrelated Runs would fail each
 * other. Outside the transaction it locks nothing. It stays the answer only while the Run has
 * not moved since (the caller compares the version it read with `turnVersion`); a racer of
 * another Run that commits the same identity afterwards is caught by the unique index, and its
 * 23505 resolved by a fresh lookup (R4.2, R4.3).
 */
export type BeforeBegin = (q: Queryable) => Promise<unknown>;

/** The first retry pauses up to this long, each further one four times longer. */
const RETRY_PAUSE_MS = 20;

export class PostgresTransactions {
  /** BEGIN + SET LOCAL of the timeouts + the transaction clock + the Run turn, one round trip (sql.ts). */
  private readonly beginText: (runLiteral: string, gated: boolean) => string;

  constructor(
    private readonly pool: Pool,
    private readonly timeouts: PostgresTimeouts,
    private readonly maxRetries: number,
    private readonly onAttempt?: (attempt: number) => void,
  ) {
    this.beginText = SQL.beginConfigured(timeouts);
  }

  /** A fresh budget: one operation's attempts, over all the transactions it runs. */
  budget(): AttemptBudget {
    return { attempts: 0 };
  }

  /**
   * One short SERIALIZABLE transaction, re-run from BEGIN only after 40001/40P01 (R5.2), and
   * only while the operation's budget lasts: at most `maxRetries` retries per operation in
   * total, whatever number of transactions it opens (R9.5; a start that meets a unique
   * violation answers it in a second transaction on the same budget). Timeouts become
   * TransactionTimeoutError, a lost server StoreUnavailableError; a 23505 is passed up raw
   * for the caller to resolve as a replay; everything else propagates as thrown.
   */
  async transaction<T>(runId: string, body: (tx: Tx) => Promise<T>, beforeBegin?: BeforeBegin, budget: AttemptBudget = this.budget(), queueFirst = false): Promise<T> {
    for (;;) {
      this.spend(budget);
      try {
        return await this.attempt(body, runId, beforeBegin, this.isLastAttempt(budget), queueFirst);
      } catch (e) {
        if (!isRetryable(e)) throw mapPgError(e);
        await this.afterRetryable(budget, e);
      }
    }
  }

  /** One more attempt of the operation (counted, reported), or CONCURRENCY_EXHAUSTED when none is left (R9.5). */
  spend(budget: AttemptBudget): void {
    if (budget.attempts > this.maxRetries) {
      throw new ConcurrencyExhaustedError(budget.attempts, `no retry left for another transaction of this operation (at most ${this.maxRetries} retries in total)`);
    }
    budget.attempts++;
    this.onAttempt?.(budget.attempts);
  }

  /**
   * The operation's last attempt (R9.5): it runs alone (pg-0052), waiting for the write
   * transactions then running and making the ones after it wait, so no writer of another Run
   * can make it fail on a page they share.
   */
  isLastAttempt(budget: AttemptBudget): boolean {
    return budget.attempts > this.maxRetries;
  }

  /**
   * After a retryable failure (40001/40P01): CONCURRENCY_EXHAUSTED when the budget is spent,
   * else a pause before the next attempt. Writers of different Runs still meet on shared B-tree
   * pages (SSI locks pages, and on a small table every probe and insert share one leaf). There
   * is no gate to queue behind, so racers that failed together spread their retries over a
   * random, growing pause.
   */
  async afterRetryable(budget: AttemptBudget, e: unknown): Promise<void> {
    if (budget.attempts > this.maxRetries) {
      throw new ConcurrencyExhaustedError(budget.attempts, `${sqlStateOf(e)}: ${e instanceof Error ? e.message : String(e)}`);
    }
    await sleep(Math.random() * RETRY_PAUSE_MS * 4 ** (budget.attempts - 1));
  }

  /** Reads outside a transaction: one statement, one snapshot, timeouts mapped. */
  async read<T>(body: (q: Queryable) => Promise<T>): Promise<T> {
    try {
      return await body(this.pool);
    } catch (e) {
      throw mapPgError(e);
    }
  }

  /**
   * One attempt on one pooled connection. Its first round trip begins the transaction and takes
   * the Run's turn (the Run head row lock, through ql3.take_run_turn) without waiting. If another
   * writer of the Run holds the turn, or committed between this snapshot and the lock, nothing
   * has been written: the attempt rolls back, waits for the turn outside any transaction (in
   * the Run's queue, then ql3.await_run_turn, each bounded by lock_timeout) and begins again
   * with a fresh snapshot. Writers
   * of one Run thus go one after another without failing each other under SERIALIZABLE, and
   * writers of different Runs never wait for each other. The lock lives exactly as long as the
   * transaction, and only the product's role can take it. A last attempt takes the start gate
   * first, in a round trip of its own (`takeGateAlone`).
   */
  private async attempt<T>(body: (tx: Tx) => Promise<T>, runId: string, beforeBegin: BeforeBegin | undefined, alone: boolean, queueFirst: boolean): Promise<T> {
    const client = await this.pool.connect();
    let broken: unknown;
    /** In the Run's queue (a session lock): left when the attempt ends, whatever its end. */
    let queued = false;
    const runLiteral = client.escapeLiteral(runId);
    const onError = (err: Error) => {
      broken ??= err;
    };
    client.on('error', onError);
    /** Outside any transaction: in the Run's queue (joined once), then until the turn is free. */
    const awaitTurn = async () => {
      queued ||= await joinRunQueue(client, runLiteral, this.timeouts.lockMs);
      await run(client, SQL.AWAIT_RUN_TURN, { run_id: runId, lock_timeout_ms: this.timeouts.lockMs });
    };
    try {
      // A start that just lost the turn (`queueFirst`) queues and waits before it begins: the
      // turn is most likely still busy, and a begin that fails on it is two round trips lost.
      if (queueFirst) await awaitTurn();
      let before = beforeBegin === undefined ? undefined : await beforeBegin(client);
      let nowMs: number | undefined;
      let turnVersion: number | null = null;
      while (nowMs === undefined) {
        try {
          const gated = alone && (await takeGateAlone(client, this.timeouts));
          const begun = (await client.query(this.beginText(runLiteral, gated))) as unknown as { rows: { now_ms?: unknown; turn?: unknown }[] }[];
          const turn = begun[begun.length - 1]?.rows[0]?.turn;
          turnVersion = turn === null || turn === undefined ? null : decodeRow(PgInt, turn, 'run turn', runId);
          nowMs = decodeRow(PgInt, begun[begun.length - 2]?.rows[0]?.now_ms, 'transaction clock', 'transaction_timestamp()');
        } catch (e) {
          const code = sqlStateOf(e);
          if (code !== SQLSTATE.lockNotAvailable && code !== SQLSTATE.serializationFailure) throw e;
          await client.query(SQL.ROLLBACK);
          await awaitTurn();
          before = beforeBegin === undefined ? undefined : await beforeBegin(client); // read again after the holder's commit
        }
      }
      const result = await body({ client, nowMs, turnVersion, ...(before === undefined ? {} : { before }) });
      // The next writer in the queue goes on to wait for the turn while this one commits.
      await client.query(queued ? `${SQL.leaveRunQueue(runLiteral)}; ${SQL.COMMIT}` : SQL.COMMIT);
      queued = false;
      return result;
    } catch (e) {
      // A server that stopped answering would only make ROLLBACK wait for the bound again;
      // discarding the connection ends the transaction just as well.
      if (unavailableReasonOf(e) !== undefined) broken ??= e;
      if (broken === undefined) {
        try {
          await client.query(SQL.ROLLBACK);
        } catch (rollbackError) {
          broken = rollbackError;
        }
      }
      // The server ends a session idle in a transaction too long; the statement that follows
      // fails with a connection error, and the reason arrives as the client's error event.
      if (sqlStateOf(e) === undefined && sqlStateOf(broken) === SQLSTATE.idleInTransactionTimeout) throw broken;
      throw e;
    } finally {
      if (queued && broken === undefined) {
        // (again, after a failed COMMIT: unlocking a key not held answers false.) A connection
        // that cannot say it left the queue is not pooled again: closing it leaves it.
        try {
          await client.query(SQL.leaveRunQueue(runLiteral));
        } catch (e) {
          broken = e;
        }
      }
      client.off('error', onError);
      client.release(broken instanceof Error ? broken : broken === undefined ? undefined : true);
    }
  }
}

/**
 * Join the Run's queue behind its other writers that lost the turn (transactionSql.ts): true
 * once in it. False when it cannot be joined within lock_timeout (a session that holds the same
 * key for its own reasons) or the role may not take advisory locks: the turn is then waited for
 * unqueued, as it always can be.
 */
const joinRunQueue = async (client: PoolClient, runLiteral: string, lockMs: number): Promise<boolean> => {
  try {
    await client.query(SQL.joinRunQueue(runLiteral, lockMs));
    return true;
  } catch (e) {
    if (unavailableReasonOf(e) !== undefined) throw e;
    const code = sqlStateOf(e);
    if (code !== SQLSTATE.lockNotAvailable && code !== SQLSTATE.insufficientPrivilege) throw e;
    return false;
  }
};

/**
 * A last attempt's gate (R9.5, pg-0057): BEGIN and the start gate held exclusively before the
 * snapshot, leaving the transaction open (true). A session that holds the gate all along (a
 * superuser's pg_dump takes ACCESS SHARE on every table) makes the wait end at lock_timeout:
 * the transaction is rolled back and the attempt runs as any other (false). So no lock an
 * unrelated session holds stalls a start beyond lock_timeout, and it never fails one.
 */
export const takeGateAlone = async (client: PoolClient, timeouts: PostgresTimeouts): Promise<boolean> => {
  try {
    await client.query(SQL.beginAlone(timeouts));
    return true;
  } catch (e) {
    // the BEGIN ran: end the transaction here, whatever failed after it (a lost server ends it too)
    if (unavailableReasonOf(e) === undefined) await client.query(SQL.ROLLBACK);
    if (sqlStateOf(e) !== SQLSTATE.lockNotAvailable) throw e;
    return false;
  }
};
