import * as t from 'io-ts';
import type { PoolClient } from 'pg';
import { CorruptRecordError, type LifecycleCommand } from '../../domain';
import type { InvocationPlans } from '../../application/invocationPlans';
import type { EvidenceKeyring } from '../../application/evidenceKeys';
import type { RecoveryApi } from '../../application/authority';
import { createRecoveryApi, type RecoveryView, type VerifySession } from '../../application/recoveryRules';
import { mapPgError, unavailableReasonOf } from './errors';
import { named } from './named';
import { createPostgresNoteStore } from './postgresNotes';
import { createPostgresRecoveryView, rowsOf, type RecoveryHost } from './postgresRecoveryView';
import { PgInt } from './rowCodecs';

// The recovery surface over a PostgreSQL authority: each read model answered in one
// REPEATABLE READ READ ONLY snapshot, and `verify` in one snapshot for all of its walks.

export const BEGIN_SNAPSHOT = 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY';
const SET_SNAPSHOT_TIMEOUT = named(`SELECT set_config('statement_timeout', :statement_timeout, true),
  (extract(epoch FROM transaction_timestamp()) * 1000)::bigint AS now_ms`);

/** Run `body` in one REPEATABLE READ READ ONLY transaction; timeouts become typed errors. */
const snapshotOn = async <T>(authority: RecoveryHost, body: (view: RecoveryView, client: PoolClient) => Promise<T>): Promise<T> => {
  let client: PoolClient;
  try {
    client = await authority.pool.connect();
  } catch (e) {
    throw mapPgError(e);
  }
  let broken: unknown;
  try {
    await client.query(BEGIN_SNAPSHOT);
    const [clock] = await rowsOf(client, SET_SNAPSHOT_TIMEOUT, { statement_timeout: String(authority.timeouts.statementMs) }, t.type({ now_ms: PgInt }), 'transaction clock', 'now');
    if (clock === undefined) throw new CorruptRecordError('transaction clock', 'now', 'no row');
    const result = await body(createPostgresRecoveryView(authority, client, clock.now_ms), client);
    await client.query('COMMIT');
    return result;
  } catch (e) {
    if (unavailableReasonOf(e) !== undefined) broken = e; // ROLLBACK would only wait again
    else await client.query('ROLLBACK').catch((rollbackError: unknown) => (broken = rollbackError));
    throw mapPgError(e);
  } finally {
    client.release(broken === undefined ? undefined : true);
  }
};

/**
 * `verify`'s session: one REPEATABLE READ READ ONLY transaction for all its reads (each
 * statement still under the statement timeout). Each read runs behind a savepoint, so one
 * that fails on damage (a table gone) leaves the transaction, and its snapshot, to the next.
 */
const verifySessionOn = <T>(authority: RecoveryHost, body: (session: VerifySession) => Promise<T>): Promise<T> =>
  snapshotOn(authority, (view, client) => {
    const guarded = async <U>(read: () => Promise<U>): Promise<U> => {
      await client.query('SAVEPOINT verify_read');
      try {
        const result = await read();
        await client.query('RELEASE SAVEPOINT verify_read');
        return result;
      } catch (e) {
        await client.query('ROLLBACK TO SAVEPOINT verify_read');
        throw mapPgError(e);
      }
    };
    const notes = createPostgresNoteStore(() => client);
    return body({
      read: (read) => guarded(() => read(view)),
      notes: { rows: (startId) => guarded(() => notes.rows(startId)), all: () => guarded(() => notes.all()) },
    });
  });

/** The recovery surface over a PostgreSQL authority (its schema must include the outcome read model). */
export const postgresRecoveryOf = (authority: RecoveryHost, keyring?: () => EvidenceKeyring | undefined, plans?: () => InvocationPlans): RecoveryApi =>
  createRecoveryApi({
    snapshot: (body) => snapshotOn(authority, body),
    verifySession: (body) => verifySessionOn(authority, body),
    handle: (command) => authority.runs.handle(command as LifecycleCommand),
    ...(keyring === undefined ? {} : { keyring }),
    ...(plans === undefined ? {} : { plans }),
    notes: createPostgresNoteStore(() => authority.pool),
  });
