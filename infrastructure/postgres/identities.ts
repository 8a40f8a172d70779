import type { ReplayIdentity } from '../../domain';
import { identityOfEventId } from '../../projections/rows';

// Where PostgreSQL keeps each R4.1 identity: the barrier's own column for it, and every unique
// constraint that refuses a second use of its value. The replay lookup, the barrier read's
// probes, the recovery lookup and the unique-violation mapping are all derived from this one
// table; a new identity is one entry here plus the migration that adds its column and index.

export type IdentityStorage =
  /**
   * A value the barrier mirrors in one column. `via`: the keyed rows the recovery lookup reads
   * it from (a table or subquery with this column and start_id), when the barrier's own column
   * has no index (each identity is unique in the replay index alone); the barrier by default.
   */
  | { readonly column: string; readonly constraints: readonly string[]; readonly via?: string }
  /** The attempt (run, StepRun, started version): three barrier columns, one key in the index. */
  | { readonly attempt: readonly ['run_id', 'step_run_id', 'started_step_run_version']; readonly constraints: readonly string[] };

export type IdentityTable = Readonly<Record<string, IdentityStorage>>;

export const IDENTITY_STORAGE: Readonly<Record<ReplayIdentity, IdentityStorage>> = {
  // Each identity is enforced once, by start_replay_identities_key (pg-0050, pg-0051); the keys listed
  // are the tables' own primary keys (foreign-key targets), which a reused id can also meet.
  startId: { column: 'start_id', constraints: ['tool_execution_start_barriers_pkey'] },
  mutationId: { column: 'mutation_id', constraints: ['step_run_mutations_pkey'], via: 'ql3.step_run_mutations' },
  runEventId: {
    column: 'run_event_id',
    constraints: [],
    via: "(SELECT event_id AS run_event_id, data_json::json ->> 'startId' AS start_id FROM ql3.events WHERE event_type = 'StepRunStarted') e",
  },
  traceId: { column: 'trace_id', constraints: ['trace_anchors_pkey'], via: 'ql3.trace_anchors' },
  auditEventId: { column: 'audit_event_id', constraints: ['security_audit_events_pkey'], via: 'ql3.security_audit_events' },
  auditReceiptId: { column: 'audit_receipt_id', constraints: ['audit_receipts_pkey'], via: 'ql3.audit_receipts' },
  attempt: { attempt: ['run_id', 'step_run_id', 'started_step_run_version'], constraints: [] },
};

/** The bound parameter that carries an identity's value: `auditEventId` -> `:audit_event_id`. */
export const paramOf = (identity: string): string => identity.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/**
 * R3.1: one equality probe of the unique replay index per identity, in one statement. The
 * command digest is the barrier's (pg-0051); a row whose barrier is missing comes back with a
 * NULL digest, which the row codec refuses (fail closed). Each probe is its own lateral scan
 * (OFFSET 0 keeps the planner from joining the seven values to the whole table): on a young
 * store a hash join over a sequential scan costs less on paper, but it reads every row, and in
 * a SERIALIZABLE transaction it locks the whole relation for SSI.
 */
export const lookupReplaySql = (table: IdentityTable = IDENTITY_STORAGE): string => `SELECT i.identity, i.value, i.start_id, ib.command_digest
  FROM (VALUES ${Object.keys(table).map((identity) => `('${identity}', :${paramOf(identity)})`).join(', ')}) AS k (identity, value)
  CROSS JOIN LATERAL (SELECT p.identity, p.value, p.start_id FROM ql3.start_replay_identities p
                       WHERE p.identity = k.identity AND p.value = k.value OFFSET 0) i
  LEFT JOIN ql3.tool_execution_start_barriers ib ON ib.start_id = i.start_id`;

/**
 * The stored value of an identity, from the barrier row `alias`: its column, or the attempt key
 * as its canonical JSON (projections/rows.ts attemptValue: no spaces, strings JSON-escaped).
 */
export const barrierValueSql = (s: IdentityStorage, alias: string): string =>
  'column' in s
    ? `${alias}.${s.column}`
    : `format('[%s,%s,%s]', to_json(${alias}.run_id)::text, to_json(${alias}.step_run_id)::text, ${alias}.started_step_run_version)`;

/** The barrier read's probes: each identity value of barrier `b`. */
export const barrierProbesSql = (table: IdentityTable = IDENTITY_STORAGE): string =>
  Object.entries(table)
    .map(([identity, s]) => `SELECT '${identity}', ${barrierValueSql(s, 'b')} FROM b`)
    .join(' UNION ALL\n    ');

/** With no barrier row `b`: the start id's own probe, so that an index naming a missing barrier fails closed. */
export const missingBarrierProbeSql = (gate: string): string =>
  `SELECT '${'startId' satisfies ReplayIdentity}', :start_id WHERE NOT EXISTS (SELECT 1 FROM b)${gate}`;

/** Recovery's lookup of one identity: in the replay index and in the barrier's own column(s). */
export const identityStartIdsSql = (storage: IdentityStorage): string => {
  const byIndex = `SELECT start_id FROM ql3.start_replay_identities WHERE identity = :identity AND value = :key`;
  const where = 'column' in storage ? `${storage.column} = :key` : 'run_id = :run_id AND step_run_id = :step_run_id AND started_step_run_version = :version::bigint';
  const rows = ('column' in storage ? storage.via : undefined) ?? 'ql3.tool_execution_start_barriers';
  return `${byIndex} UNION ALL SELECT start_id FROM ${rows} WHERE ${where}`;
};

const EVENT_ID_DETAIL = /\(event_id\)=\(([^)]*)\)/;
const INDEX_DETAIL = /\(identity, value\)=\(([A-Za-z]+),/;

/**
 * The identity a unique violation names: an event id carries its identity as a prefix (rows.ts),
 * the replay index names it in the key, any other constraint is found in the table. undefined:
 * not an identity (a stream position taken under us).
 */
export const identityOfViolation = (
  violation: { readonly constraint?: string | undefined; readonly detail?: string | undefined },
  table: IdentityTable = IDENTITY_STORAGE,
): string | undefined => {
  const constraint = violation.constraint ?? '';
  if (constraint === 'events_event_id_key') return identityOfEventId(EVENT_ID_DETAIL.exec(violation.detail ?? '')?.[1] ?? '');
  if (constraint === 'start_replay_identities_key') {
    const identity = INDEX_DETAIL.exec(violation.detail ?? '')?.[1];
    if (identity !== undefined && Object.hasOwn(table, identity)) return identity;
  }
  return Object.entries(table).find(([, s]) => s.constraints.includes(constraint))?.[0];
};

