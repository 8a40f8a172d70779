import { named } from './named';
import { setLocalTimeouts } from './roundTripSql';

// SQL of the PostgreSQL transactions (transactions.ts): BEGIN with its timeouts, clock and the
// Run turn, COMMIT. Every value is a bound parameter, a validated integer or a literal escaped
// by the driver.

export const BEGIN_SERIALIZABLE = 'BEGIN ISOLATION LEVEL SERIALIZABLE';
export const COMMIT = 'COMMIT';
export const ROLLBACK = 'ROLLBACK';

type Timeouts = { readonly statementMs: number; readonly lockMs: number; readonly idleInTransactionMs: number };

const CLOCK = 'SELECT (extract(epoch FROM transaction_timestamp()) * 1000)::bigint AS now_ms';

/**
 * BEGIN, SET LOCAL of the three timeouts, the transaction clock of R3.10 read once (every row
 * of the transaction carries it), and the Run turn (the Run head's row lock, taken without
 * waiting by `ql3.take_run_turn`, pg-0037), in one simple-protocol round trip. The simple
 * protocol takes no parameters, so the timeouts are inlined (integers the authority validated
 * on open, checked again by setLocalTimeouts) and the Run id is the driver's escaped literal.
 * The clock and the turn are the last two results.
 *
 * The turn rides in the first round trip because a SERIALIZABLE snapshot is taken by the first
 * statement: a writer that had to wait for the turn inside its transaction would then fail on
 * the previous holder's writes. So the turn never waits here; `AWAIT_RUN_TURN` waits outside.
 * `gated`: the transaction is already open, its timeouts set, and holds the start gate
 * (`beginAlone`), so only the clock and the turn are left to read.
 */
export const beginConfigured = (t: Timeouts): ((runLiteral: string, gated: boolean) => string) => {
  const begin = [BEGIN_SERIALIZABLE, ...setLocalTimeouts(t)].join('; ');
  return (runLiteral, gated) => `${gated ? '' : `${begin}; `}${CLOCK}; SELECT ql3.take_run_turn(${runLiteral}, false) AS turn`;
};

/**
 * A last attempt's first round trip (R9.5, pg-0057): BEGIN, the timeouts, and the start gate
 * taken exclusively, queued for at most lock_timeout. LOCK TABLE takes no snapshot, so the
 * SERIALIZABLE snapshot, fixed by the next statement, sees every writer that held the gate
 * before: none is concurrent with this attempt, and none can fail it.
 */
export const beginAlone = (t: Timeouts): string => [BEGIN_SERIALIZABLE, ...setLocalTimeouts(t), 'LOCK TABLE ql3.start_gate IN ACCESS EXCLUSIVE MODE'].join('; ');

/**
 * Outside any transaction: wait until the Run's turn is free (its row lock, bounded by the
 * lock timeout passed), and let it go again at once. The caller then begins afresh.
 */
export const AWAIT_RUN_TURN = named('SELECT ql3.await_run_turn(:run_id, :lock_timeout_ms::integer) AS turn');

/**
 * The Run's queue (the advisory lock class is ql3's own; the key is the Run id's hash): a session
 * lock, so it outlives the implicit transaction it is taken in and the write transaction after
 * it. PostgreSQL grants an exclusive lock to its waiters in the order they came, so the Run's
 * writers that lost its turn take it one after another instead of all rushing at each commit.
 * It orders them and guards nothing: the turn is still the Run head's row lock.
 */
const RUN_QUEUE_CLASS = 7433267;
const runQueueKey = (runLiteral: string) => `${RUN_QUEUE_CLASS}, pg_catalog.hashtext(${runLiteral})`;
export const joinRunQueue = (runLiteral: string, lockMs: number): string =>
  `SET LOCAL lock_timeout = '${Math.max(1, Math.trunc(lockMs))}'; SELECT pg_catalog.pg_advisory_lock(${runQueueKey(runLiteral)})`;
export const leaveRunQueue = (runLiteral: string): string => `SELECT pg_catalog.pg_advisory_unlock(${runQueueKey(runLiteral)}) AS left_queue`;
