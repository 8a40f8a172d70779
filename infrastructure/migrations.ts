import { createHash } from 'node:crypto';
import { EMBEDDED_MIGRATIONS } from './migrationsSql.generated';
import { LEDGER_DIGEST_TAG, fieldsDigest } from '../domain/eventChain';
import { CorruptRecordError } from '../domain';

// Forward-only, checksummed migrations, shared by both backends. No runner on npm does both
// a synchronous better-sqlite3 `BEGIN IMMEDIATE` and a pg advisory-locked transaction with
// checksums, and the rules fit on one screen, so the plan is ours; each driver applies it.

export class MigrationError extends Error {
  readonly code = 'MIGRATION_REFUSED' as const;
  /**
   * The ledger contradicts this code's migrations inside the part both know (a name or a
   * checksum changed): `verify` reports it as damage (R9.2), where a store that is only behind
   * or ahead of the code is a version to fix.
   */
  readonly ledgerContradicts: boolean;
  constructor(message: string, ledgerContradicts = false) {
    super(message);
    this.name = 'MigrationError';
    this.ledgerContradicts = ledgerContradicts;
  }
}

/**
 * A runtime without migration rights (`migrate: false`, or a login that may not create the
 * schema) met a database nobody migrated: only the owner can fix that, so the message says so.
 */
export class SchemaMissingError extends MigrationError {
  readonly reason = 'schema_missing' as const;
  constructor(detail: string) {
    super(`${detail}: ask the owner to run migrate (qinglong-barrier --postgres URL migrate, as a superuser or a member of ql3_owner; or review and run the SQL of migrate --print-sql)`);
    this.name = 'SchemaMissingError';
  }
}

/**
 * The ledger names a migration this package does not ship where the package has another: the
 * store was written by a version that was never released, and no upgrade path leads from it.
 */
export class UnreleasedStoreError extends MigrationError {
  readonly reason = 'unreleased_store' as const;
  readonly migration: string;
  constructor(migration: string) {
    super(`the store's migration ledger names ${migration}, which this package does not ship: the store was written by an unreleased version and must be recreated; nothing was applied`);
    this.name = 'UnreleasedStoreError';
    this.migration = migration;
  }
}

export interface Migration {
  readonly name: string;
  readonly sql: string;
  readonly checksum: string;
}

export interface AppliedMigration {
  readonly name: string;
  readonly checksum: string;
}

export const checksumOf = (sql: string): string => 'sha256:' + createHash('sha256').update(sql, 'utf8').digest('hex');

/**
 * The migrations of one dialect, in order. The SQL is embedded in the built code
 * (migrationsSql.generated.ts, written from migrations/ by the build), never read from disk:
 * a bundle or a relocated install has no migrations/ folder beside it, and walking up from
 * the module could find an application's own.
 */
export const loadMigrations = (dialect: 'sqlite' | 'postgres'): Migration[] =>
  EMBEDDED_MIGRATIONS[dialect].map(({ name, sql }) => ({ name, sql, checksum: checksumOf(sql) }));

/**
 * What is left to apply. Refuses a database written by an unreleased version (its ledger names a
 * migration this package does not ship), one whose applied migrations were edited (checksum
 * differs), are unknown to this code (the database is newer), or were applied out of order.
 */
export const planMigrations = (known: readonly Migration[], applied: readonly AppliedMigration[]): Migration[] => {
  const unreleased = applied.find((a, i) => i < known.length && !known.some((k) => k.name === a.name));
  if (unreleased !== undefined) throw new UnreleasedStoreError(unreleased.name);
  applied.forEach((a, i) => {
    const k = known[i];
    if (k === undefined) {
      throw new MigrationError(`database has migration ${a.name} that this code does not know: the database is newer than the code; upgrade the package`);
    }
    if (k.name !== a.name) throw new MigrationError(`migration order differs: database has ${a.name} where the code has ${k.name}`, true);
    if (k.checksum !== a.checksum) {
      throw new MigrationError(`migration ${a.name} was edited after it was applied (checksum ${a.checksum} in the database, ${k.checksum} in the code)`, true);
    }
  });
  return known.slice(applied.length);
};

/**
 * `verify`'s reading of the ledger and the capability rows (R9.2): a changed name or checksum,
 * a missing or extra row, or a capability other than the one the migrations set is a problem
 * to report. An open refuses the same ledger (MigrationError); verify sees it without reopening.
 */
/** A ledger row as verify reads it: with when it was applied and the digest binding that. */
export interface LedgerRow extends AppliedMigration {
  readonly applied_at_ms: number | string;
  readonly ledger_digest: string | null;
}

export const ledgerDigestOf = (r: Omit<LedgerRow, 'ledger_digest'>): string => fieldsDigest(LEDGER_DIGEST_TAG, [r.name, r.checksum, Number(r.applied_at_ms)]);

export const schemaProblems = (
  dialect: 'sqlite' | 'postgres',
  applied: readonly LedgerRow[],
  capabilities: readonly { readonly name: unknown; readonly version: unknown }[],
): string[] => {
  const problems: string[] = [];
  try {
    const pending = planMigrations(loadMigrations(dialect), applied);
    if (pending.length > 0) problems.push(`schema_migrations lacks ${pending.map((m) => m.name).join(', ')}, which this store's schema holds`);
  } catch (e) {
    problems.push(`schema_migrations: ${(e as Error).message}`);
  }
  for (const r of applied) {
    if (r.ledger_digest !== ledgerDigestOf(r)) problems.push(`schema_migrations row ${r.name}: its name, checksum and applied_at_ms ${String(r.applied_at_ms)} do not match ledger_digest`);
  }
  const expected = CAPABILITIES[dialect];
  const found = capabilities.map((c) => `${String(c.name)}@${String(c.version)}`).sort();
  if (found.join(',') !== expected) problems.push(`capabilities are ${found.join(', ') || '(none)'}, the migrations set ${expected}`);
  return problems;
};

/**
 * An open refuses what verify reports of the ledger and the capability rows (a time or a
 * capability changed past its digest): CORRUPT_RECORD, recordKind 'schema', as for the objects.
 */
export const requireLedgerAsWritten = (
  dialect: 'sqlite' | 'postgres',
  applied: readonly LedgerRow[],
  capabilities: readonly { readonly name: unknown; readonly version: unknown }[],
): void => {
  const problems = schemaProblems(dialect, applied, capabilities);
  if (problems.length > 0) throw new CorruptRecordError('schema', 'schema_migrations', `the migration ledger is not as the migrations wrote it (${problems.join('; ')}): restore it from a copy`);
};

/** What the capability migrations (0056, pg-0030) leave in the table. */
const CAPABILITIES = { sqlite: 'local-control-core@28', postgres: 'control-core@29' } as const;
