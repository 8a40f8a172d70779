import { named } from './named';
import { setLocalTimeouts } from './roundTripSql';

// SQL of the PostgreSQL transactions (transactions.ts): BEGIN with its timeouts, clock and the
// Run turn, COMMIT. Every value is a bound parameter, a validated integer or a literal escaped
// by the driver.

export const BEGIN_SERIALIZABLE = 'BEGIN ISOLATION LEVEL SERIALIZABLE';
export const COMMIT = 'COMMIT';
export const ROLLBACK = 'ROLLBACK';
/**
 * `requireSynchronousStandby`: in the write transaction, before any write; no
 * synchronous standby attached raises Q3S01 and the transaction rolls back.
 */
export const REQUIRE_SYNC_STANDBY = 'SELECT ql3.require_sync_standby() AS sync_standbys';

type Timeouts = { readonly statementMs: number; readonly lockMs: number; readonly idleInTransactionMs: number };

const CLOCK = 'SELECT (extract(epoch FROM transaction_timestamp()) * 1000)::bigint AS now_ms';

/**
 * BEGIN, SET LOCAL of the three timeouts, the transaction clock of R3.10 read once (every row
 * of the transaction carries it), and the Run turn (the Run head's row lock, taken without
 * waiting by `ql3.take_run_turn`), in one simple-protocol round trip. The simple
 * protocol takes no parameters, so the timeouts are inlined (integers the authority validated
 * on open, checked again by setLocalTimeouts) and the Run id is the driver's escaped literal.
 * The clock and the turn are the last two results.
 *
 * The turn rides in the first round trip because a SERIALIZABLE snapshot is taken by the first
 * statement: a writer that had to wait for the turn inside its transaction would then fail on
 * the previous holder's writes. So the turn does not wait here (`AWAIT_RUN_TURN` waits outside),
 * but for a last attempt that holds the start gate (`alone`): no other writer is then in a
 * transaction, and the only holder it can wait for is an `AWAIT_RUN_TURN`, which writes nothing
 * (ql3.lock_run_head). `begun`: a last attempt's transaction is already open, its timeouts set,
 * holding the gate or not (`beginAlone`), so only the clock and the turn are left to read.
 */
export const beginConfigured = (t: Timeouts): ((runLiteral: string, begun: boolean, alone: boolean) => string) => {
  const begin = [BEGIN_SERIALIZABLE, ...setLocalTimeouts(t)].join('; ');
  return (runLiteral, begun, alone) => `${begun ? '' : `${begin}; `}${CLOCK}; SELECT ql3.take_run_turn(${runLiteral}, ${alone}) AS turn`;
};

/**
 * A last attempt's first round trip (R9.5): BEGIN, the timeouts, and the start gate
 * taken exclusively, queued for at most lock_timeout. LOCK TABLE takes no snapshot, so the
 * SERIALIZABLE snapshot, fixed by the next statement, sees every writer that held the gate
 * before: none is concurrent with this attempt, and none can fail it.
 */
export const beginAlone = (t: Timeouts): string => [BEGIN_SERIALIZABLE, ...setLocalTimeouts(t), 'SAVEPOINT ql3_gate', 'LOCK TABLE ql3.start_gate IN ACCESS EXCLUSIVE MODE'].join('; ');
/** The gate not had within lock_timeout: the transaction goes on without it (no snapshot taken yet). */
export const ROLLBACK_TO_GATE = 'ROLLBACK TO SAVEPOINT ql3_gate';

/**
 * Outside any transaction: wait until the Run's turn is free (its row lock, bounded by the
 * lock timeout passed), and let it go again at once. The caller then begins afresh.
 */
export const AWAIT_RUN_TURN = named('SELECT ql3.await_run_turn(:run_id, :lock_timeout_ms::integer) AS turn');
