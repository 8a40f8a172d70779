import { named } from './named';

// SQL of the PostgreSQL transactions (transactions.ts): BEGIN with its timeouts and clock, the
// Run turn and the retry gate, COMMIT. Every value is a bound parameter or a validated integer.

export const BEGIN_SERIALIZABLE = 'BEGIN ISOLATION LEVEL SERIALIZABLE';
export const COMMIT = 'COMMIT';
export const ROLLBACK = 'ROLLBACK';

/**
 * The Run turn (transactions.ts `attempt`): a session advisory lock per Run, taken before BEGIN by
 * every write transaction of that Run, so writers of one Run go one by one and each takes its
 * SERIALIZABLE snapshot after the previous one committed (no rw-conflict between them).
 *
 * Writers of different Runs can still fail each other with 40001: SSI locks B-tree *pages*, and
 * on small tables (a fresh deployment) every replay lookup and every insert share the same
 * leaf pages. So the same statement also takes the retry gate: a first attempt holds it
 * shared (all first attempts run together), a retry holds it exclusive (it runs alone once the
 * attempts in flight have finished, so it cannot meet another writer and fail again).
 *
 * One round trip: the session's lock_timeout bounds both waits; it is put back at the end. If
 * the statement fails half way, a lock it took stays with the session, so the caller then
 * discards the connection (which releases everything) instead of returning it to the pool.
 */
export const RUN_TURN_CLASS = 7173; // first key of the two-key advisory lock space: "ql3" turns
export const RETRY_GATE_CLASS = 7174;
const takeTurn = (gate: string) =>
  named(
    `SELECT current_setting('lock_timeout') AS previous, set_config('lock_timeout', :lock_timeout, false) AS lock_timeout, pg_advisory_lock(${RUN_TURN_CLASS}, hashtext(:key)) AS turn, ${gate}(${RETRY_GATE_CLASS}, 0) AS gate`,
  );
const endTurn = (gate: string) =>
  named(
    `SELECT pg_advisory_unlock(${RUN_TURN_CLASS}, hashtext(:key)) AS unlocked, ${gate}(${RETRY_GATE_CLASS}, 0) AS gate, set_config('lock_timeout', :lock_timeout, false) AS lock_timeout`,
  );
/**
 * BEGIN, SET LOCAL of the three timeouts, and the transaction clock of R3.10 read once (every
 * row of the transaction carries it), in one simple-protocol round trip. The simple protocol takes no parameters, so the timeouts are inlined; they
 * are integers the authority validated on open, and checked again here.
 */
export const beginConfigured = (t: { readonly statementMs: number; readonly lockMs: number; readonly idleInTransactionMs: number }): string => {
  const ms = (v: number) => {
    if (!Number.isSafeInteger(v) || v < 1) throw new RangeError(`timeout ${v} is not a positive integer`);
    return `'${v}'`;
  };
  return `${BEGIN_SERIALIZABLE}; SELECT
  set_config('statement_timeout', ${ms(t.statementMs)}, true) AS statement_timeout,
  set_config('lock_timeout', ${ms(t.lockMs)}, true) AS lock_timeout,
  set_config('idle_in_transaction_session_timeout', ${ms(t.idleInTransactionMs)}, true) AS idle_timeout,
  (extract(epoch FROM transaction_timestamp()) * 1000)::bigint AS now_ms`;
};

/**
 * COMMIT and the end of the Run turn in one simple-protocol round trip. If COMMIT fails, the
 * server skips the rest of the string, so the caller still holds its turn and ends it with
 * END_*_TURN; ending a turn twice only makes the unlock return false. Only a lost connection
 * can fail the SELECT after a good COMMIT, and that is the ambiguous lost acknowledgement any
 * COMMIT has (the caller's exact replay answers it). `literal` must be the driver's
 * escapeLiteral (the key and the saved setting are strings).
 */
export const commitAndEndTurn = (retry: boolean, key: string, previousLockTimeout: string, literal: (s: string) => string): string =>
  `${COMMIT}; SELECT pg_advisory_unlock(${RUN_TURN_CLASS}, hashtext(${literal(key)})) AS unlocked, ${retry ? 'pg_advisory_unlock' : 'pg_advisory_unlock_shared'}(${RETRY_GATE_CLASS}, 0) AS gate, set_config('lock_timeout', ${literal(previousLockTimeout)}, false) AS lock_timeout`;

export const TAKE_RUN_TURN = takeTurn('pg_advisory_lock_shared');
export const END_RUN_TURN = endTurn('pg_advisory_unlock_shared');
export const TAKE_RETRY_TURN = takeTurn('pg_advisory_lock');
export const END_RETRY_TURN = endTurn('pg_advisory_unlock');

