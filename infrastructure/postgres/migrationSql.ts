import { named } from './named';

// The PostgreSQL migration runner's statements (migrate.ts), in schema ql3: its lock, its
// timeouts and the ledger of applied files.

/**
 * Two migrators of one database never interleave: the ledger table's lock, in a mode that
 * conflicts with itself and not with readers. Only roles with rights on the ledger can take it.
 */
export const MIGRATION_LOCK = 'LOCK TABLE ql3.schema_migrations IN SHARE ROW EXCLUSIVE MODE';
/**
 * A migration may backfill and a second migrator must wait for the first, so the
 * runtime's session timeouts (our pool sets them per connection) are lifted for this
 * transaction only.
 */
export const MIGRATION_TIMEOUTS = named(`SELECT set_config('statement_timeout', :statement_timeout, true), set_config('lock_timeout', :lock_timeout, true)`);
export const MIGRATIONS_PRESENT = named(`SELECT to_regclass(:table) IS NOT NULL AS present`);
export const SELECT_APPLIED = named('SELECT name, checksum FROM ql3.schema_migrations ORDER BY name');
/** The capability rows, checked by an open and by verify against what the migrations set. */
export const SELECT_CAPABILITIES = named('SELECT name, version FROM ql3.capabilities ORDER BY name');
/** The ledger as an open and verify check it: each row with when it was applied and its digest. */
export const SELECT_LEDGER = named('SELECT name, checksum, applied_at_ms, ledger_digest FROM ql3.schema_migrations ORDER BY name');
export const INSERT_APPLIED = named(`INSERT INTO ql3.schema_migrations (name, checksum, applied_at_ms)
  VALUES (:name, :checksum, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)`);
export const RESET_ROLE = 'RESET ROLE';
