import type { ReplayIdentity } from '../../domain';

// Where SQLite keeps each R4.1 identity: the facts' own keys. Each identity is the key of the
// row that holds it (the barrier's start id and attempt, each fact table's primary key, the
// RunEvent's event id), and each such row carries the start it belongs to; the barrier's insert
// refuses a fact of another start (tool_execution_start_barriers_own_facts), so a value binds at
// most one start. The replay lookup, the barrier read's probes, the recovery lookup and the
// unique-violation mapping are all derived from this one table; a new identity is one entry
// here plus the key that holds it.

export type IdentityStorage =
  /**
   * A value the barrier mirrors in one column, kept as the key of `via` (a table or subquery
   * with this column and start_id; the barrier itself by default). `unique`: the columns whose
   * unique key refuses a second use (`table.column`, as SQLite names it in a constraint error).
   */
  | { readonly column: string; readonly unique: readonly string[]; readonly via?: string }
  /** The attempt (run, StepRun, started version): the barrier's unique key on three columns. */
  | { readonly attempt: readonly ['run_id', 'step_run_id', 'started_step_run_version']; readonly unique: readonly string[] };

export type IdentityTable = Readonly<Record<string, IdentityStorage>>;

const BARRIERS = 'tool_execution_start_barriers';

export const IDENTITY_STORAGE: Readonly<Record<ReplayIdentity, IdentityStorage>> = {
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
  // SQLite names the first column of a multi-column key in its constraint error
  attempt: { attempt: ['run_id', 'step_run_id', 'started_step_run_version'], unique: ['tool_execution_start_barriers.run_id'] },
};

/** The attempt's stored value (projections/rows attemptValue) from the barrier's columns. */
const ATTEMPT_VALUE = 'json_array(k.run_id, k.step_run_id, k.started_step_run_version)';

/** One element of the bound attempt value; NULL (no row) for a value that is not JSON, as a stored one may be. */
const part = (i: number): string => `CASE WHEN json_valid(p.v) THEN json_extract(p.v, '$[${i}]') END`;

/**
 * One identity's probe: the rows whose key holds the value bound, as (identity, value, start_id).
 * The attempt's value is its JSON array, split in place so the barrier's unique key is probed.
 */
const probe = (identity: string, storage: IdentityStorage): string =>
  'column' in storage
    ? `SELECT '${identity}' AS identity, k.${storage.column} AS value, k.start_id FROM ${storage.via ?? BARRIERS} k WHERE k.${storage.column} = ?`
    : `SELECT '${identity}' AS identity, ${ATTEMPT_VALUE} AS value, k.start_id FROM (SELECT ? AS v) p JOIN ${BARRIERS} k
        ON k.run_id = ${part(0)} AND k.step_run_id = ${part(1)} AND k.started_step_run_version = ${part(2)}`;

/** One identity's probe alone (one value bound). */
export const identityProbeSql = (identity: ReplayIdentity, table: IdentityTable = IDENTITY_STORAGE): string => probe(identity, table[identity]!);

/** R3.1: one key probe per identity in one statement; values bound in table order. */
export const lookupReplaySql = (table: IdentityTable = IDENTITY_STORAGE): string =>
  Object.entries(table)
    .map(([identity, storage]) => probe(identity, storage))
    .join(' UNION ALL ');

/**
 * A barrier read's probes of its own identity values: each finds the row that holds it, so a
 * fact missing, changed or naming another start is seen. A fact naming the start under a value
 * the barrier does not hold is `verify`'s to find (STRAY_IDENTITIES).
 */
export const identitiesOfStartSql = (table: IdentityTable = IDENTITY_STORAGE): string => lookupReplaySql(table);

/** The command digest of the barrier a probe row names: none when that barrier is missing. */
export const commandDigestOfStartSql = (): string => 'SELECT command_digest FROM tool_execution_start_barriers WHERE start_id = ?';

/** Recovery's lookup of one identity: the start of the row whose key holds it (its barrier read checks the rest). */
export const identityStartIdsSql = (storage: IdentityStorage): string =>
  'column' in storage
    ? `SELECT start_id FROM ${storage.via ?? BARRIERS} WHERE ${storage.column} = @key`
    : `SELECT start_id FROM ${BARRIERS} WHERE run_id = @run_id AND step_run_id = @step_run_id AND started_step_run_version = @version`;

/** The identity a unique column guards (`table.column` from SQLite's error), if it is one. */
export const identityOfUniqueColumn = (column: string, table: IdentityTable = IDENTITY_STORAGE): string | undefined =>
  Object.entries(table).find(([, s]) => s.unique.includes(column))?.[0];

/**
 * Rows that claim a start whose barrier is missing: StepRun mutation rows that name it (an
 * index probe) and its barrier event in the log (the event id is `barrier:<startId>`, a
 * unique-index probe). Any other row naming such a start breaks the foreign key, which verify checks.
 */
export const indexNamesStartSql = (): string =>
  `SELECT 0 AS indexed,
          (SELECT count(*) FROM step_run_mutations WHERE start_id = @start_id) AS mutations,
          (SELECT count(*) FROM events WHERE event_id = 'barrier:' || @start_id) AS logged`;

/** Every value some barrier names under each identity, with its start: what verify counts duplicates and strays in. */
export const barrierIdentitiesSql = (table: IdentityTable = IDENTITY_STORAGE): string =>
  Object.entries(table)
    .map(([identity, s]) => `SELECT '${identity}' AS identity, ${'column' in s ? `k.${s.column}` : ATTEMPT_VALUE} AS value, k.start_id FROM ${BARRIERS} k`)
    .join(' UNION ALL ');

/** Every value held under each identity by the row whose key it is, with the start that row names. */
export const keyedIdentitiesSql = (table: IdentityTable = IDENTITY_STORAGE): string =>
  Object.entries(table)
    .map(([identity, s]) => `SELECT '${identity}' AS identity, ${'column' in s ? `k.${s.column}` : ATTEMPT_VALUE} AS value, k.start_id FROM ${('column' in s ? s.via : undefined) ?? BARRIERS} k`)
    .join(' UNION ALL ');

/**
 * The rows holding each value one barrier names (its start id bound once per identity, in table
 * order), as (identity, value, start_id): what the barrier read's probes find for a stored start.
 */
export const identitiesOfBarrierSql = (table: IdentityTable = IDENTITY_STORAGE): string =>
  Object.entries(table)
    .map(([identity, s]) =>
      'column' in s && s.via !== undefined
        ? `SELECT '${identity}' AS identity, k.${s.column} AS value, k.start_id FROM ${BARRIERS} b JOIN ${s.via} k ON k.${s.column} = b.${s.column} WHERE b.start_id = ?`
        : `SELECT '${identity}' AS identity, ${'column' in s ? `k.${s.column}` : ATTEMPT_VALUE} AS value, k.start_id FROM ${BARRIERS} k WHERE k.start_id = ?`,
    )
    .join(' UNION ALL ');
