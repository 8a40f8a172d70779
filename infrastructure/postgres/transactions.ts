import { setTimeout as sleep } from 'node:timers/promises';
import type { Pool, PoolClient } from 'pg';
import { ConcurrencyExhaustedError, TransactionTimeoutError } from '../../domain';
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
  /**
   * The overall bound of one operation (default 30000, R13.1): no transaction begins and no
   * wait starts after it; past it the operation ends in TRANSACTION_TIMEOUT (deadline) with
   * nothing written. A transaction already running is bounded by statementMs and queryMs.
   */
  readonly deadlineMs: number;
}

/**
 * One operation's write transactions so far and its deadline (R9.5, R13.1): every BEGIN
 * spends one, a lost turn included, whatever number of transactions the operation opens.
 */
export interface AttemptBudget {
  attempts: number;
  readonly deadlineAt: number;
}

/** What is left of an operation's deadline, in ms (at least 1: a lock wait of 0 would wait for ever). */
export const msLeft = (budget: AttemptBudget): number => Math.max(1, budget.deadlineAt - Date.now());

/** Past the deadline: the typed error, nothing written (R13.1). */
export const requireBeforeDeadline = (budget: AttemptBudget, deadlineMs: number): void => {
  if (Date.now() >= budget.deadlineAt) {
    throw new TransactionTimeoutError('deadline', `the operation did not finish within its deadline of ${deadlineMs} ms (timeouts.deadlineMs) after ${budget.attempts} write transaction(s); nothing more was written`);
  }
};

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

/**
 * What a `BeforeBegin` read returns when it is the operation's answer (an exact replay, a
 * conflict): the attempt ends with it and begins no write transaction (R13.1; readAnswers.ts).
 */
export class AnsweredByRead<T> {
  constructor(readonly value: T) {}
}

/** The first retry pauses up to this long, each further one four times longer. */
const RETRY_PAUSE_MS = 20;

export class PostgresTransactions {
  /** BEGIN + SET LOCAL of the timeouts + the transaction clock + the Run turn, one round trip (sql.ts). */
  private readonly beginText: (runLiteral: string, begun: boolean, alone: boolean) => string;

  constructor(
    private readonly pool: Pool,
    private readonly timeouts: PostgresTimeouts,
    private readonly maxRetries: number,
    private readonly onAttempt?: (attempt: number) => void,
  ) {
    this.beginText = SQL.beginConfigured(timeouts);
  }

  /** A fresh budget: one operation's attempts, over all the transactions it runs, and its deadline. */
  budget(): AttemptBudget {
    return { attempts: 0, deadlineAt: Date.now() + this.timeouts.deadlineMs };
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
      try {
        return await this.attempt(body, runId, beforeBegin, budget, queueFirst);
      } catch (e) {
        if (!isRetryable(e)) throw mapPgError(e);
        await this.afterRetryable(budget, e);
      }
    }
  }

  /**
   * One more write transaction of the operation (counted, reported), just before its BEGIN; or
   * CONCURRENCY_EXHAUSTED when none is left (R9.5, R13.1: at most 1 + maxRetries in total, lost
   * turns included), or TRANSACTION_TIMEOUT (deadline) when the operation's deadline has passed.
   */
  spend(budget: AttemptBudget): void {
    if (budget.attempts > this.maxRetries) {
      throw new ConcurrencyExhaustedError(budget.attempts, `no write transaction left for this operation (at most 1 + ${this.maxRetries} in total, lost turns of the Run included)`);
    }
    requireBeforeDeadline(budget, this.timeouts.deadlineMs);
    budget.attempts++;
    this.onAttempt?.(budget.attempts);
  }

  /**
   * The operation's last attempt (R9.5): it runs alone, waiting for the write
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
    await sleep(Math.min(Math.random() * RETRY_PAUSE_MS * 4 ** (budget.attempts - 1), msLeft(budget)));
  }

  /** A turn lost: CONCURRENCY_EXHAUSTED when no write transaction is left to try again, so no wait is spent for nothing. */
  requireAttemptLeft(budget: AttemptBudget, cause: string): void {
    if (budget.attempts > this.maxRetries) throw new ConcurrencyExhaustedError(budget.attempts, cause);
    requireBeforeDeadline(budget, this.timeouts.deadlineMs);
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
   * has been written: the attempt rolls back, waits for the turn outside any transaction
   * (ql3.await_run_turn, bounded by lock_timeout and the operation's deadline) and begins again
   * with a fresh snapshot, spending one more of the operation's write transactions (R13.1).
   * Writers of one Run thus go one after another without failing each other under
   * SERIALIZABLE, and writers of different Runs never wait for each other. No lock outlives a
   * transaction, and only the product's role can take the ones used. A last attempt takes the
   * start gate first (`takeGateAlone`).
   */
  private async attempt<T>(body: (tx: Tx) => Promise<T>, runId: string, beforeBegin: BeforeBegin | undefined, budget: AttemptBudget, queueFirst: boolean): Promise<T> {
    const client = await this.pool.connect();
    let broken: unknown;
    const runLiteral = client.escapeLiteral(runId);
    const onError = (err: Error) => {
      broken ??= err;
    };
    client.on('error', onError);
    /** Outside any transaction: until the turn is free, within lock_timeout and the deadline. */
    const awaitTurn = async () => {
      await run(client, SQL.AWAIT_RUN_TURN, { run_id: runId, lock_timeout_ms: Math.min(this.timeouts.lockMs, msLeft(budget)) });
    };
    try {
      // A start that just lost the turn (`queueFirst`) waits before it begins: the turn is most
      // likely still busy, and a begin that fails on it is a write transaction lost.
      if (queueFirst) await awaitTurn();
      let before = beforeBegin === undefined ? undefined : await beforeBegin(client);
      if (before instanceof AnsweredByRead) return before.value as T;
      let nowMs: number | undefined;
      let turnVersion: number | null = null;
      while (nowMs === undefined) {
        this.spend(budget); // every BEGIN counts (R13.1)
        try {
          // a last attempt has its transaction open already, with the gate or without it
          const begun = this.isLastAttempt(budget);
          const alone = begun && (await takeGateAlone(client, this.timeouts, budget));
          const results = (await client.query(this.beginText(runLiteral, begun, alone))) as unknown as { rows: { now_ms?: unknown; turn?: unknown }[] }[];
          const turn = results[results.length - 1]?.rows[0]?.turn;
          turnVersion = turn === null || turn === undefined ? null : decodeRow(PgInt, turn, 'run turn', runId);
          nowMs = decodeRow(PgInt, results[results.length - 2]?.rows[0]?.now_ms, 'transaction clock', 'transaction_timestamp()');
        } catch (e) {
          const code = sqlStateOf(e);
          if (code !== SQLSTATE.lockNotAvailable && code !== SQLSTATE.serializationFailure) throw e;
          await client.query(SQL.ROLLBACK);
          this.requireAttemptLeft(budget, `the Run's turn stayed with other writers (${code}: ${e instanceof Error ? e.message : String(e)})`);
          await awaitTurn();
          before = beforeBegin === undefined ? undefined : await beforeBegin(client); // read again after the holder's commit
          if (before instanceof AnsweredByRead) return before.value as T; // the holder wrote the answer: no BEGIN for it
        }
      }
      const result = await body({ client, nowMs, turnVersion, ...(before === undefined ? {} : { before }) });
      await client.query(SQL.COMMIT);
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
      client.off('error', onError);
      client.release(broken instanceof Error ? broken : broken === undefined ? undefined : true);
    }
  }
}

/**
 * A last attempt's gate (R9.5): BEGIN, the timeouts, and the start gate held
 * exclusively before the snapshot (true). A session that holds the gate all along (a
 * superuser's pg_dump takes ACCESS SHARE on every table) makes the wait end at lock_timeout:
 * the lock is undone to its savepoint and the attempt runs as any other, in the same
 * transaction (false), so the gate costs no second BEGIN (R13.1). Either way the transaction is
 * open, its timeouts set and no snapshot taken yet (LOCK, SAVEPOINT and ROLLBACK TO take none).
 * Its lock_timeout is what is left of the deadline where that is less: the waits for the gate
 * and then for the Run's turn (ql3.lock_run_head) both end within the operation's bound (R13.1).
 */
export const takeGateAlone = async (client: PoolClient, timeouts: PostgresTimeouts, budget: AttemptBudget): Promise<boolean> => {
  try {
    await client.query(SQL.beginAlone({ ...timeouts, lockMs: Math.min(timeouts.lockMs, msLeft(budget)) }));
    return true;
  } catch (e) {
    if (unavailableReasonOf(e) !== undefined) throw e;
    if (sqlStateOf(e) !== SQLSTATE.lockNotAvailable) {
      await client.query(SQL.ROLLBACK); // the BEGIN ran: end the transaction here
      throw e;
    }
    await client.query(SQL.ROLLBACK_TO_GATE);
    return false;
  }
};
