import type { DatabaseError } from 'pg';
import { CorruptRecordError, PreconditionError, StoreUnavailableError, TransactionTimeoutError, type UnavailableReason } from '../../domain';
import { redactSecrets } from '../../domain/redact';

// pg error codes are mapped here and never leave the adapter raw for the cases the protocol
// knows: retryable serialization failures, timeouts, and unique violations (which are a
// domain outcome, resolved by a fresh replay lookup, never a version conflict).

export const SQLSTATE = {
  serializationFailure: '40001',
  deadlockDetected: '40P01',
  uniqueViolation: '23505',
  foreignKeyViolation: '23503',
  undefinedTable: '42P01',
  undefinedColumn: '42703',
  lockNotAvailable: '55P03',
  insufficientPrivilege: '42501',
  queryCanceled: '57014',
  idleInTransactionTimeout: '25P03',
  diskFull: '53100',
  readOnlyTransaction: '25006',
  /** feature_not_supported: what a hot standby answers a SERIALIZABLE transaction (the one feature our statements may lack). */
  featureNotSupported: '0A000',
  /** Raised by ql3.require_sync_standby: no synchronous standby is attached; nothing was written. */
  noSyncStandby: 'Q3S01',
  /** Raised by the event trigger: the insert would make an illegal history (R9.1). */
  historyRefused: 'Q3H01',
  /** Raised by ql3.take_start_turn before any write: another writer of the Run was first. */
  turnLost: 'Q3T01',
  /** Raised by the streams guard: the Run was compacted and is never written again (R14.2). */
  runCompacted: 'Q3C01',
} as const;

/** Node socket errors that mean the server cannot be reached or went away. */
const SOCKET_CODES: Readonly<Record<string, UnavailableReason>> = {
  ECONNREFUSED: 'connection_refused',
  EHOSTUNREACH: 'connection_refused',
  ENETUNREACH: 'connection_refused',
  ENOTFOUND: 'connection_refused',
  EAI_AGAIN: 'connection_refused',
  ECONNRESET: 'connection_terminated',
  EPIPE: 'connection_terminated',
  ETIMEDOUT: 'connect_timeout',
};

/**
 * The driver's own messages (pg and pg-pool raise plain Errors without a code for these): the
 * client-side connect bound, the client-side query bound, and a connection that died.
 */
const DRIVER_MESSAGES: readonly (readonly [RegExp, UnavailableReason])[] = [
  [/timeout exceeded when trying to connect|connection timeout|^timeout expired$/i, 'connect_timeout'],
  [/^Query read timeout$/, 'query_timeout'],
  [/Connection terminated|not queryable|Client was closed|connection error/i, 'connection_terminated'],
  // pg-pool's answer to a connect after end(): the authority was closed (or a caller's pool ended)
  [/Cannot use a pool after calling end on the pool/i, 'closed'],
];

export const sqlStateOf = (e: unknown): string | undefined =>
  (typeof e === 'object' && e !== null && typeof (e as { code?: unknown }).code === 'string')
    ? ((e as { code?: string }).code ?? undefined)
    : undefined;

/** Only these are known safe to retry (R5.2): the whole transaction is re-run from BEGIN. */
export const isRetryable = (e: unknown): boolean => {
  const code = sqlStateOf(e);
  return code === SQLSTATE.serializationFailure || code === SQLSTATE.deadlockDetected;
};

/** The unique index of StepRun versions in the log: a hit means the head is behind its log. */
const STEP_RUN_VERSION_INDEX = 'events_step_run_version_key';

const repeatsStepRunVersion = (e: unknown): boolean =>
  sqlStateOf(e) === SQLSTATE.uniqueViolation && (e as { constraint?: unknown }).constraint === STEP_RUN_VERSION_INDEX;

/** A unique index refused a value another writer holds: a replay or a race, resolved by a fresh lookup. */
export const isUniqueViolation = (e: unknown): e is DatabaseError => sqlStateOf(e) === SQLSTATE.uniqueViolation && !repeatsStepRunVersion(e);

/** Whether `e` means the server cannot be reached or stopped answering (never retried here). */
export const unavailableReasonOf = (e: unknown): UnavailableReason | undefined => {
  const code = sqlStateOf(e);
  if (code !== undefined) {
    if (code in SOCKET_CODES) return SOCKET_CODES[code];
    if (code === '57P01' || code === '57P02' || code === '57P03') return 'server_shutdown';
    if (code.startsWith('08') || code === '53300') return 'connection_refused';
    if (code === SQLSTATE.diskFull) return 'disk_full';
    // A standby after a switch (or a read-only default): the connection is dropped by the caller,
    // never reused, since it stays on the server that cannot write.
    if (code === SQLSTATE.readOnlyTransaction || code === SQLSTATE.featureNotSupported) return 'read_only';
    if (code === SQLSTATE.noSyncStandby) return 'no_sync_standby';
    return undefined;
  }
  if (!(e instanceof Error)) return undefined;
  return DRIVER_MESSAGES.find(([pattern]) => pattern.test(e.message))?.[1];
};

const UNAVAILABLE_MESSAGES: Partial<Record<UnavailableReason, (message: string) => string>> = {
  read_only: (m) => `the server cannot write (a standby, or read-only transactions: ${m}); nothing was written, the connection is dropped; replay the same command once the primary answers (settleStart)`,
  // the driver's own words ("Cannot use a pool after calling end on the pool") are not repeated
  closed: () => 'the PostgreSQL start barrier authority or the pool it runs on is closed; nothing was written, open a new one',
  no_sync_standby: (m) => `refused by requireSynchronousStandby: ${m}; nothing was written`,
};

/** Every driver error the protocol knows, typed: timeouts, then unavailability; others pass. */
export const mapPgError = (e: unknown): unknown => {
  const timeout = mapTimeout(e);
  if (timeout !== e) return timeout;
  const reason = unavailableReasonOf(e);
  if (reason === undefined) return e;
  const message = redactSecrets(e instanceof Error ? e.message : String(e));
  return new StoreUnavailableError(reason, UNAVAILABLE_MESSAGES[reason]?.(message) ?? `PostgreSQL did not answer the operation (${message}); whether a write in flight committed is unknown, an exact replay tells`);
};

/** Lock, statement and idle-in-transaction timeouts become the typed timeout, a refused history CORRUPT_RECORD; others pass. */
export const mapTimeout = (e: unknown): unknown => {
  const message = e instanceof Error ? e.message : String(e);
  if (repeatsStepRunVersion(e)) {
    return new CorruptRecordError('run history', 'ql3.events', `a StepRun event repeats a version its log has: the StepRun head is behind its log (${message})`);
  }
  switch (sqlStateOf(e)) {
    case SQLSTATE.lockNotAvailable:
      return new TransactionTimeoutError('lock', `lock_timeout expired waiting for a row lock; the transaction rolled back (${message})`);
    case SQLSTATE.queryCanceled:
      return new TransactionTimeoutError('statement', `statement_timeout expired; the transaction rolled back (${message})`);
    case SQLSTATE.runCompacted:
      return new PreconditionError('run_compacted', message);
    case SQLSTATE.historyRefused:
      // The decider planned on heads the log does not back: the store is not what it claims.
      return new CorruptRecordError('run history', 'ql3.events', message);
    // A table or column the migrations made is gone, a row a write references is missing, or an
    // outcome row stands without the event it projects (a second one is refused by the log
    // first): the store is damaged (R9.3), whatever the statement was.
    case SQLSTATE.undefinedTable:
    case SQLSTATE.undefinedColumn:
      return new CorruptRecordError('postgres schema', 'ql3', `${message}: a table or column this store's migrations made is missing`);
    case SQLSTATE.foreignKeyViolation:
      return new CorruptRecordError('run history', String((e as { constraint?: unknown }).constraint ?? 'foreign key'), `a row this write references is missing (${message})`);
    case SQLSTATE.uniqueViolation:
      if (!String((e as { constraint?: unknown }).constraint).startsWith('start_outcomes_')) return e;
      return new CorruptRecordError('start outcome', 'ql3.start_outcomes', `an outcome row stands for this start without its outcome event in the log (${message})`);
    case SQLSTATE.idleInTransactionTimeout:
      return new TransactionTimeoutError('idle_in_transaction', `idle_in_transaction_session_timeout expired; the server ended the session and rolled back (${message})`);
    default:
      return e;
  }
};
