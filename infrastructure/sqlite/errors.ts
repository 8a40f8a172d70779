import { SemanticConflictError, TransactionTimeoutError, type ReplayIdentity } from '../../domain';
import { isSqliteError } from './connection';
import { identityOfUniqueColumn } from './identities';

/** Driver errors never leave the adapter raw: busy is a timeout, a unique hit is a conflict. */
export const mapSqliteError = (e: unknown, startId?: string): unknown => {
  if (!isSqliteError(e)) return e;
  if (e.code === 'SQLITE_BUSY' || e.code === 'SQLITE_BUSY_TIMEOUT') return new TransactionTimeoutError('busy', `database is locked by another writer (${e.message})`);
  if (e.code === 'SQLITE_CONSTRAINT_UNIQUE' || e.code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
    const column = /failed: ([\w.]+)/.exec(e.message)?.[1] ?? '';
    const identity = identityOfUniqueColumn(column) as ReplayIdentity | undefined;
    if (identity !== undefined) return new SemanticConflictError(identity, column, undefined, `${identity} is already used by another record (${column})${startId ? ` while starting ${startId}` : ''}`);
  }
  return e;
};
