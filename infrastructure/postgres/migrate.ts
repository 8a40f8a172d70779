import type { ClientBase } from 'pg';
import * as t from 'io-ts';
import { loadMigrations, MigrationError, SchemaMissingError, planMigrations, requireLedgerAsWritten, type AppliedMigration, type LedgerRow, type Migration } from '../migrations';
import { PgInt, decodeRows } from './rowCodecs';
import { TransactionTimeoutError } from '../../domain';
import { SQLSTATE, sqlStateOf } from './errors';
import { bind, type NamedSql, type Params } from './named';
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

const INSUFFICIENT_PRIVILEGE = '42501';

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
    const applied = await readApplied(client);
    const pending = planMigrations(known, applied);
    for (const m of pending) {
      await client.query(SQL.RESET_ROLE);
      try {
        await client.query(m.sql); // no parameters: simple protocol, several statements per file
      } catch (e) {
        const message = e instanceof Error ? e.message : String(e);
        // A login without the rights to create the schema, on a database nobody migrated.
        if (applied.length === 0 && m === pending[0] && (e as { code?: unknown }).code === INSUFFICIENT_PRIVILEGE) {
          throw new SchemaMissingError(`the database has no start barrier schema and this login may not create it (${message})`);
        }
        throw pastDeadline(e, options.deadlineMs) ?? Object.assign(new MigrationError(`migration ${m.name} failed: ${message}`), { cause: e });
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
  const applied = await readApplied(client);
  if (applied.length === 0) throw new SchemaMissingError('the database has no start barrier schema (no ql3.schema_migrations)');
  const pending = planMigrations(known, applied);
  if (pending.length > 0) {
    throw new MigrationError(
      `the database schema is behind this code: ${pending.map((m) => m.name).join(', ')} not applied; run the migrations as the owner (migrate: true)`,
    );
  }
  await requireSchemaAsMigrated(client);
};

const literal = (text: string): string => `'${text.replace(/'/g, "''")}'`;
/** A runner statement with its parameters written in as literals: the same text migrate sends. */
const inlined = (sql: NamedSql, params: Params): string =>
  `${sql.text.replace(/\$(\d+)/g, (_m, n: string) => literal(String(bind(sql, params)[Number(n) - 1])))};`;

export interface PendingSql {
  /** The migrations this database lacks, in order. */
  readonly pending: readonly string[];
  /** One script a DBA can review and run (`psql -v ON_ERROR_STOP=1 -f`): what `migrate` would do. */
  readonly sql: string;
}

/**
 * `migrate --print-sql`: the SQL `migrate` would run on this database, applying nothing. The
 * same steps as migratePostgres (one transaction, the migrators' lock, each file with the role
 * reset and its ledger row); the objects' check it makes before COMMIT is made by the next open.
 */
export const pendingMigrationSql = async (client: ClientBase, known: readonly Migration[] = loadMigrations('postgres')): Promise<PendingSql> => {
  const applied = await readApplied(client);
  const pending = planMigrations(known, applied);
  if (pending.length === 0) return { pending: [], sql: `-- nothing to apply: this database has all ${known.length} migrations of this version\n` };
  const lines = [
    `-- qinglong-barrier migrate --print-sql: the ${pending.length} migration(s) this database lacks (it has ${applied.length} of ${known.length}), in one transaction.`,
    applied.length === 0
      ? '-- Run as a superuser: the first migration creates the group roles ql3_owner, ql3_runtime, ...'
      : '-- Run as a superuser or a member of ql3_owner.',
    '--   psql "postgres://USER@HOST/DATABASE" -v ON_ERROR_STOP=1 -f THIS_FILE',
    'BEGIN;',
    inlined(SQL.MIGRATION_TIMEOUTS, { statement_timeout: '0', lock_timeout: '0' }),
    ...(applied.length === 0 ? [] : [`${SQL.MIGRATION_LOCK};`]),
  ];
  for (const m of pending) {
    lines.push(
      '',
      `-- ${m.name} (${m.checksum})`,
      `${SQL.RESET_ROLE};`,
      m.sql.trimEnd(),
      `${SQL.RESET_ROLE};`,
      inlined(SQL.INSERT_APPLIED, { name: m.name, checksum: m.checksum }),
    );
  }
  lines.push('', 'COMMIT;', '');
  return { pending: pending.map((m) => m.name), sql: lines.join('\n') };
};
