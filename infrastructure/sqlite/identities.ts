import type { ReplayIdentity } from '../../domain';

// Where SQLite keeps each R4.1 identity: the barrier's own column for it, and every unique
// column that refuses a second use of its value (`table.column`, as SQLite names it in a
// constraint error). The replay lookup, the barrier read's probes, the recovery lookup and the
// unique-violation mapping are all derived from this one table; a new identity is one entry
// here plus the migration that adds its column and index.

export type IdentityStorage =
  /**
   * A value the barrier mirrors in one column. `via`: the keyed rows the recovery lookup reads
   * it from (a table or subquery with this column and start_id), when the barrier's own column
   * has no index (each identity is unique in the replay index alone); the barrier by default.
   */
  | { readonly column: string; readonly unique: readonly string[]; readonly via?: string }
  /** The attempt (run, StepRun, started version): three barrier columns, one key in the index. */
  | { readonly attempt: readonly ['run_id', 'step_run_id', 'started_step_run_version']; readonly unique: readonly string[] };

export type IdentityTable = Readonly<Record<string, IdentityStorage>>;

export const IDENTITY_STORAGE: Readonly<Record<ReplayIdentity, IdentityStorage>> = {
  // Each identity is enforced once, by start_replay_identities_key (0080, 0081); the columns listed
  // are the tables' own primary keys (foreign-key targets) and the event id, which a reused id can also meet.
  startId: { column: 'start_id', unique: ['tool_execution_start_barriers.start_id'] },
  mutationId: { column: 'mutation_id', unique: ['step_run_mutations.mutation_id'], via: 'step_run_mutations' },
  runEventId: {
    column: 'run_event_id',
    unique: ['events.event_id'],
    via: "(SELECT event_id AS run_event_id, json_extract(data_json, '$.startId') AS start_id FROM events WHERE event_type = 'StepRunStarted')",
  },
  traceId: { column: 'trace_id', unique: ['trace_anchors.trace_id'], via: 'trace_anchors' },
  auditEventId: { column: 'audit_event_id', unique: ['security_audit_events.audit_event_id'], via: 'security_audit_events' },
  auditReceiptId: { column: 'audit_receipt_id', unique: ['audit_receipts.audit_receipt_id'], via: 'audit_receipts' },
  attempt: { attempt: ['run_id', 'step_run_id', 'started_step_run_version'], unique: [] },
};

// The index row holds the identity and its start (0081); the command digest is the barrier's,
// read once per start the rows name (reads.ts), not joined to each of the seven probes. Each
// probe names one identity, so no row comes back twice (the table has no rowid, 0082).
const probe = (identity: string) => `SELECT i.identity, i.value, i.start_id FROM start_replay_identities i WHERE i.identity = '${identity}' AND i.value = ?`;

/** R3.1: one unique-index probe per identity in one statement; values bound in table order. */
export const lookupReplaySql = (table: IdentityTable = IDENTITY_STORAGE): string => Object.keys(table).map(probe).join(' UNION ALL ');

/**
 * A barrier read's probes of its own identity values: each finds a missing, changed or
 * duplicated row through the unique index. A row naming the start under a value the barrier
 * does not hold is `verify`'s to find (STRAY_IDENTITIES), and fails any lookup of that value.
 */
export const identitiesOfStartSql = (table: IdentityTable = IDENTITY_STORAGE): string => lookupReplaySql(table);

/** The command digest of the barrier an index row names: none when that barrier is missing. */
export const commandDigestOfStartSql = (): string => 'SELECT command_digest FROM tool_execution_start_barriers WHERE start_id = ?';

/** Recovery's lookup of one identity: in the replay index and in the barrier's own column(s). */
export const identityStartIdsSql = (storage: IdentityStorage): string => {
  const byIndex = `SELECT start_id FROM start_replay_identities WHERE identity = @identity AND value = @key`;
  const where = 'column' in storage ? `${storage.column} = @key` : 'run_id = @run_id AND step_run_id = @step_run_id AND started_step_run_version = @version';
  const rows = ('column' in storage ? storage.via : undefined) ?? 'tool_execution_start_barriers';
  return `${byIndex} UNION ALL SELECT start_id FROM ${rows} WHERE ${where}`;
};

/** The identity a unique column guards (`table.column` from SQLite's error), if it is one. */
export const identityOfUniqueColumn = (column: string, table: IdentityTable = IDENTITY_STORAGE): string | undefined =>
  Object.entries(table).find(([, s]) => s.unique.includes(column))?.[0];

/**
 * Rows of the replay index that name a start as its startId value (a unique-index probe),
 * StepRun mutation rows that name it (an index probe), and its barrier event in the log (the
 * event id is `barrier:<startId>`, a unique-index probe). Any other row naming a start whose
 * barrier is missing breaks the foreign key, which verify checks.
 */
export const indexNamesStartSql = (): string =>
  `SELECT (SELECT count(*) FROM start_replay_identities WHERE identity = '${'startId' satisfies ReplayIdentity}' AND value = @start_id) AS indexed,
          (SELECT count(*) FROM step_run_mutations WHERE start_id = @start_id) AS mutations,
          (SELECT count(*) FROM events WHERE event_id = 'barrier:' || @start_id) AS logged`;
