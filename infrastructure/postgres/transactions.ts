import type { Pool, PoolClient } from 'pg';
import { ConcurrencyExhaustedError } from '../../domain';
import { SQLSTATE, isRetryable, mapPgError, sqlStateOf, unavailableReasonOf } from './errors';
import { run, type Queryable } from './query';
import { PgInt, decodeRow } from './rowCodecs';
import * as SQL from './sql';

// Transaction and turn handling for the PostgreSQL authority: one short SERIALIZABLE
// transaction per operation, on a pooled connection that first takes the Run's turn.

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

/** What one transaction attempt hands its body: the connection and the clock read once (R3.10). */
export interface Tx {
  readonly client: PoolClient;
  readonly nowMs: number;
}

/** How many transaction attempts one operation has made so far (R9.5: shared by all of them). */
export interface AttemptBudget {
  attempts: number;
}

export class PostgresTransactions {
  /** BEGIN + SET LOCAL of the timeouts + the transaction clock, one round trip (sql.ts). */
  private readonly beginText: string;

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
   *
   * A retry first takes its turn on the Run (see `attempt`): the losers of one race were all
   * parked on the same row lock and woke together, and would otherwise meet there again.
   */
  async transaction<T>(runId: string, body: (tx: Tx) => Promise<T>, budget: AttemptBudget = this.budget()): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      if (budget.attempts > this.maxRetries) {
        throw new ConcurrencyExhaustedError(budget.attempts, `no retry left for another transaction of this operation (at most ${this.maxRetries} retries in total)`);
      }
      budget.attempts++;
      this.onAttempt?.(budget.attempts);
      try {
        return await this.attempt(body, runId, attempt > 1);
      } catch (e) {
        if (!isRetryable(e)) throw mapPgError(e);
        if (budget.attempts > this.maxRetries) {
          throw new ConcurrencyExhaustedError(budget.attempts, `${sqlStateOf(e)}: ${e instanceof Error ? e.message : String(e)}`);
        }
      }
    }
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
   * One attempt on one pooled connection. The connection first waits for a session advisory
   * lock keyed by the Run (its turn), bounded by lock_timeout, and holds it until its
   * transaction has committed or rolled back: writers of one Run go one after another, each
   * with a snapshot taken after the previous one committed, so they do not fail each other
   * under SERIALIZABLE (a retry only remains for cross-Run predicate-lock conflicts). It costs
   * one round trip (the take; the end rides with COMMIT); the lock lives exactly as long as the
   * attempt (PostgreSQL also drops it if the session dies).
   */
  private async attempt<T>(body: (tx: Tx) => Promise<T>, runId: string, retry: boolean): Promise<T> {
    const client = await this.pool.connect();
    let broken: unknown;
    const onError = (err: Error) => {
      broken ??= err;
    };
    client.on('error', onError);
    let turn: { readonly key: string; readonly previousLockTimeout: string } | undefined;
    try {
      try {
        const [taken] = await run<{ previous: string }>(client, retry ? SQL.TAKE_RETRY_TURN : SQL.TAKE_RUN_TURN, {
          key: runId,
          lock_timeout: String(this.timeouts.lockMs),
        });
        turn = { key: runId, previousLockTimeout: taken?.previous ?? '0' };
      } catch (e) {
        broken ??= e; // it may hold one of its two locks: discard the session (sql.ts)
        throw e;
      }
      const begun = (await client.query(this.beginText)) as unknown as { rows: { now_ms?: unknown }[] }[];
      const nowMs = decodeRow(PgInt, begun[1]?.rows[0]?.now_ms, 'transaction clock', 'transaction_timestamp()');
      const result = await body({ client, nowMs });
      await client.query(SQL.commitAndEndTurn(retry, turn.key, turn.previousLockTimeout, (v) => client.escapeLiteral(v)));
      turn = undefined; // committed and ended in one round trip
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
      if (turn !== undefined && broken === undefined) {
        try {
          await run(client, retry ? SQL.END_RETRY_TURN : SQL.END_RUN_TURN, { key: turn.key, lock_timeout: turn.previousLockTimeout });
        } catch (unlockError) {
          broken = unlockError; // destroying the session releases the lock and the setting
        }
      }
      client.off('error', onError);
      client.release(broken instanceof Error ? broken : broken === undefined ? undefined : true);
    }
  }
}
