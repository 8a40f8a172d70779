import type { DatabaseError } from 'pg';
import { TransactionTimeoutError } from '../../domain';

// pg error codes are mapped here and never leave the adapter raw for the cases the protocol
// knows: retryable serialization failures, timeouts, and unique violations (which are a
// domain outcome, resolved by a fresh replay lookup, never a version conflict).

export const SQLSTATE = {
  serializationFailure: '40001',
  deadlockDetected: '40P01',
  uniqueViolation: '23505',
  lockNotAvailable: '55P03',
  queryCanceled: '57014',
  idleInTransactionTimeout: '25P03',
} as const;

export const sqlStateOf = (e: unknown): string | undefined =>
  (typeof e === 'object' && e !== null && typeof (e as { code?: unknown }).code === 'string')
    ? ((e as { code?: string }).code ?? undefined)
    : undefined;

/** Only these are known safe to retry (R5.2): the whole transaction is re-run from BEGIN. */
export const isRetryable = (e: unknown): boolean => {
  const code = sqlStateOf(e);
  return code === SQLSTATE.serializationFailure || code === SQLSTATE.deadlockDetected;
};

export const isUniqueViolation = (e: unknown): e is DatabaseError => sqlStateOf(e) === SQLSTATE.uniqueViolation;

/** Lock, statement and idle-in-transaction timeouts become the typed timeout; others pass. */
export const mapTimeout = (e: unknown): unknown => {
  const message = e instanceof Error ? e.message : String(e);
  switch (sqlStateOf(e)) {
    case SQLSTATE.lockNotAvailable:
      return new TransactionTimeoutError('lock', `lock_timeout expired waiting for a row lock; the transaction rolled back (${message})`);
    case SQLSTATE.queryCanceled:
      return new TransactionTimeoutError('statement', `statement_timeout expired; the transaction rolled back (${message})`);
    case SQLSTATE.idleInTransactionTimeout:
      return new TransactionTimeoutError('idle_in_transaction', `idle_in_transaction_session_timeout expired; the server ended the session and rolled back (${message})`);
    default:
      return e;
  }
};
