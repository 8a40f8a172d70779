import { CorruptRecordError, SemanticConflictError, StoreUnavailableError, TransactionTimeoutError, type ReplayIdentity } from '../../domain';
import { isSqliteError } from './connection';
import { identityOfUniqueColumn } from './identities';

// SQLite's primary result code is the part of the extended code before the first '_' suffix
// group: SQLITE_READONLY_DBMOVED, SQLITE_IOERR_WRITE, SQLITE_CORRUPT_INDEX and the like.
const primary = (code: string): string => /^SQLITE_[A-Z]+/.exec(code)?.[0] ?? code;

/**
 * Driver errors never leave the adapter raw: busy is a timeout, a unique hit is a conflict, a
 * full disk or read-only storage is STORE_UNAVAILABLE (nothing was written), a file SQLite
 * itself finds malformed is CORRUPT_RECORD (R9.5), and so is a history trigger's refusal
 * (R9.1): the decider planned on heads the log does not back.
 */
export const mapSqliteError = (e: unknown, startId?: string): unknown => {
  if (!isSqliteError(e)) return e;
  if (e.code === 'SQLITE_CONSTRAINT_TRIGGER' && e.message.startsWith('illegal history refused')) return new CorruptRecordError('run history', 'events', e.message);
  if (e.code === 'SQLITE_BUSY' || e.code === 'SQLITE_BUSY_TIMEOUT' || e.code === 'SQLITE_BUSY_SNAPSHOT') return new TransactionTimeoutError('busy', `database is locked by another writer (${e.message})`);
  // the unique index of StepRun versions in the log: the head is behind its log
  if (e.code === 'SQLITE_CONSTRAINT_UNIQUE' && e.message.includes('events_step_run_version')) {
    return new CorruptRecordError('run history', 'events', `a StepRun event repeats a version its log has: the StepRun head is behind its log (${e.message})`);
  }
  // A table or column the migrations made is gone, a row a write references is missing, or an
  // outcome row stands without the event it projects (a second one is refused by the log
  // first): the store is damaged (R9.3), whatever the statement was.
  if (e.code === 'SQLITE_ERROR' && /^no such (table|column)/.test(e.message)) return new CorruptRecordError('sqlite schema', 'database', `${e.message}: a table or column this store's migrations made is missing`);
  if (e.code === 'SQLITE_CONSTRAINT_FOREIGNKEY') return new CorruptRecordError('run history', 'foreign key', `a row this write references is missing (${e.message})`);
  if ((e.code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || e.code === 'SQLITE_CONSTRAINT_UNIQUE') && e.message.includes('failed: start_outcomes.')) {
    return new CorruptRecordError('start outcome', 'start_outcomes', `an outcome row stands for this start without its outcome event in the log (${e.message})`);
  }
  if (e.code === 'SQLITE_CONSTRAINT_UNIQUE' || e.code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
    const column = /failed: ([\w.]+)/.exec(e.message)?.[1] ?? '';
    const identity = identityOfUniqueColumn(column) as ReplayIdentity | undefined;
    if (identity !== undefined) return new SemanticConflictError(identity, column, undefined, `${identity} is already used by another record (${column})${startId ? ` while starting ${startId}` : ''}`);
  }
  switch (primary(e.code)) {
    case 'SQLITE_FULL':
      return new StoreUnavailableError('disk_full', `the database or its disk is full; the transaction rolled back (${e.code})`);
    case 'SQLITE_READONLY':
      return new StoreUnavailableError('read_only', `the database is read-only; the transaction rolled back (${e.code})`);
    case 'SQLITE_IOERR':
    case 'SQLITE_CANTOPEN':
      return new StoreUnavailableError('connection_refused', `the database file cannot be read or written (${e.code})`);
    case 'SQLITE_CORRUPT':
    case 'SQLITE_NOTADB':
      return new CorruptRecordError('sqlite file', 'database', `SQLite reports a malformed database (${e.code})`);
    default:
      return e;
  }
};

/** A read outside the authority's own operations (a note, or inside `verify`'s one transaction), its driver errors typed as theirs are. */
export const mappedRead = async <T>(read: () => T | Promise<T>): Promise<T> => {
  try {
    return await read();
  } catch (e) {
    throw mapSqliteError(e);
  }
};
