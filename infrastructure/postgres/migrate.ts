import type { ClientBase } from 'pg';
import * as t from 'io-ts';
import { loadMigrations, MigrationError, planMigrations, requireLedgerAsWritten, type AppliedMigration, type LedgerRow, type Migration } from '../migrations';
import { PgInt, decodeRows } from './rowCodecs';
import { TransactionTimeoutError } from '../../domain';
import { SQLSTATE, sqlStateOf } from './errors';
import { bind } from './named';
import * as SQL from './sql';
import { requireSchemaObjects } from './schemaObjects';

// The PostgreSQL side of the shared migration plan: all pending files in ONE transaction
// (PostgreSQL DDL is transactional, so a failed file leaves nothing behind), holding the ledger
// table's lock so concurrent migrators of one database apply each file exactly once. That lock
// is on a ql3 object: a login without ql3 rights cannot take it (an advisory key anyone can
// hold would stall every migrating open, R13.1). Every wait is bounded by the deadline.
// Each file runs with the session's own role reset first; files that own objects say
// `SET LOCAL ROLE ql3_owner` themselves, so what a file does never depends on its predecessor.

const readApplied = async (client: ClientBase): Promise<AppliedMigration[]> => {
  const present = await client.query<{ present: boolean }>(SQL.MIGRATIONS_PRESENT.text, bind(SQL.MIGRATIONS_PRESENT, { table: `${SQL.SCHEMA}.schema_migrations` }));
  if (present.rows[0]?.present !== true) return [];
  const rows = await client.query<{ name: unknown; checksum: unknown }>(SQL.SELECT_APPLIED.text);
  return rows.rows.map((r) => {
    if (typeof r.name !== 'string' || typeof r.checksum !== 'string') throw new MigrationError('schema_migrations holds a row that is not (name, checksum) text');
    return { name: r.name, checksum: r.checksum };
  });
};

const LedgerRowCodec = t.type({ name: t.string, checksum: t.string, applied_at_ms: PgInt, ledger_digest: t.union([t.string, t.null]) });
const CapabilityRow = t.type({ name: t.unknown, version: t.unknown });

/** The ledger and the capability rows, decoded: what an open and verify check against the migrations. */
export const readLedger = async (client: ClientBase): Promise<{ ledger: LedgerRow[]; capabilities: { name: unknown; version: unknown }[] }> => ({
  ledger: decodeRows(LedgerRowCodec, (await client.query(SQL.SELECT_LEDGER.text)).rows, 'schema_migrations', 'ledger'),
  capabilities: decodeRows(CapabilityRow, (await client.query(SQL.SELECT_CAPABILITIES.text)).rows, 'capabilities', 'rows'),
});

/** An open's check: the objects, and the ledger and capability rows as the migrations wrote them. */
const requireSchemaAsMigrated = async (client: ClientBase): Promise<void> => {
  await requireSchemaObjects(client);
  const { ledger, capabilities } = await readLedger(client);
  requireLedgerAsWritten('postgres', ledger, capabilities);
};

export interface MigrationReport {
  readonly applied: readonly string[];
}

/**
 * Apply what is pending, or refuse (edited, unknown or reordered migrations: MigrationError). A
 * schema brought up to this code's last migration must hold the objects the migrations make
 * (schemaObjects.ts): that is checked before COMMIT, so a damaged schema is refused with nothing applied.
 */
export interface MigrateOptions {
  readonly checkObjects?: boolean;
  /**
   * The bound of the whole migration in ms (R13.1): the lock_timeout and statement_timeout of
   * its transaction; past it TRANSACTION_TIMEOUT (deadline), nothing applied. Left out: no
   * bound (scripts that build a schema once).
   */
  readonly deadlineMs?: number;
}

/** A lock or statement timeout of a bounded migration: its deadline passed (R13.1). */
const pastDeadline = (e: unknown, deadlineMs: number | undefined): TransactionTimeoutError | undefined => {
  const code = sqlStateOf(e);
  if (deadlineMs === undefined || (code !== SQLSTATE.lockNotAvailable && code !== SQLSTATE.queryCanceled)) return undefined;
  return new TransactionTimeoutError('deadline', `the migration did not finish within its deadline of ${deadlineMs} ms (a lock held by another session, or a long statement); nothing was applied`);
};

/** Two first migrations of an empty database met on the objects pg-0001 creates: the second tries again, then under the ledger's lock. */
const isFirstMigrationRace = (e: unknown): boolean => ['23505', '42P06', '42710'].includes(sqlStateOf((e as { cause?: unknown }).cause ?? e) ?? '');

export const migratePostgres = async (client: ClientBase, known: readonly Migration[] = loadMigrations('postgres'), options: MigrateOptions = {}): Promise<MigrationReport> => {
  try {
    return await migrateOnce(client, known, options);
  } catch (e) {
    if (!isFirstMigrationRace(e)) throw e;
    return migrateOnce(client, known, options);
  }
};

const migrateOnce = async (client: ClientBase, known: readonly Migration[], options: MigrateOptions): Promise<MigrationReport> => {
  const bound = options.deadlineMs === undefined ? '0' : String(Math.max(1, Math.trunc(options.deadlineMs)));
  const started = Date.now();
  await client.query('BEGIN');
  try {
    await client.query(SQL.MIGRATION_TIMEOUTS.text, bind(SQL.MIGRATION_TIMEOUTS, { statement_timeout: bound, lock_timeout: bound }));
    // The ledger's own lock (SHARE ROW EXCLUSIVE conflicts with itself, not with readers), only
    // when something is pending: a runtime login opening a current schema may read the ledger
    // and lock nothing (it has no right to this mode).
    if ((await ledgerPresent(client)) && planMigrations(known, await readApplied(client)).length > 0) await client.query(SQL.MIGRATION_LOCK);
    if (options.deadlineMs !== undefined && Date.now() - started >= options.deadlineMs) throw pastDeadline(Object.assign(new Error('deadline'), { code: SQLSTATE.lockNotAvailable }), options.deadlineMs);
    const pending = planMigrations(known, await readApplied(client));
    for (const m of pending) {
      await client.query(SQL.RESET_ROLE);
      try {
        await client.query(m.sql); // no parameters: simple protocol, several statements per file
      } catch (e) {
        throw pastDeadline(e, options.deadlineMs) ?? Object.assign(new MigrationError(`migration ${m.name} failed: ${e instanceof Error ? e.message : String(e)}`), { cause: e });
      }
      await client.query(SQL.RESET_ROLE);
      await client.query(SQL.INSERT_APPLIED.text, bind(SQL.INSERT_APPLIED, { name: m.name, checksum: m.checksum }));
    }
    const latest = loadMigrations('postgres').at(-1)?.name;
    if ((options.checkObjects ?? true) && known.at(-1)?.name === latest) await requireSchemaAsMigrated(client);
    await client.query('COMMIT');
    return { applied: pending.map((m) => m.name) };
  } catch (e) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw pastDeadline(e, options.deadlineMs) ?? e;
  }
};

const ledgerPresent = async (client: ClientBase): Promise<boolean> =>
  (await client.query<{ present: boolean }>(SQL.MIGRATIONS_PRESENT.text, bind(SQL.MIGRATIONS_PRESENT, { table: `${SQL.SCHEMA}.schema_migrations` }))).rows[0]?.present === true;

/** With `migrate: false` (a runtime login cannot run DDL): the schema must already be current. */
export const assertSchemaCurrent = async (client: ClientBase, known: readonly Migration[] = loadMigrations('postgres')): Promise<void> => {
  const pending = planMigrations(known, await readApplied(client));
  if (pending.length > 0) {
    throw new MigrationError(
      `the database schema is behind this code: ${pending.map((m) => m.name).join(', ')} not applied; run the migrations as the owner (migrate: true)`,
    );
  }
  await requireSchemaAsMigrated(client);
};
