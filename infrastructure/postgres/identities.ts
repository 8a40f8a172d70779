import type { ReplayIdentity } from '../../domain';
import { attemptValue, identityOfEventId, type AuditEventRow, type AuditReceiptRow, type BarrierRow, type MutationRow, type ReplayIdentityRow, type TraceAnchorRow } from '../../projections/rows';

// Where PostgreSQL keeps each R4.1 identity: in the unique key of the fact that carries it (the
// barrier's primary key and attempt key, each fact table's primary key, the RunEvent's event
// id), each fact naming its start. The barrier's insert checks every fact it names carries its
// start id (schema file), so a value binds one start at most. The replay lookup, the recovery
// lookup, the compaction guard's check and the unique-violation mapping are all derived from
// this one table; a new identity is one entry here plus the schema line of its key.

export interface IdentityStorage {
  /** The table whose unique key holds the value. */
  readonly table: string;
  /** The key's columns; for the attempt, three columns matched against the value's JSON array. */
  readonly key: readonly string[];
  /** The start the keyed row binds, over alias `f`. */
  readonly startOf: string;
  /** Rows of the table that hold this identity (the RunEvent among the events). */
  readonly where?: string;
  /** The barrier column(s) that name this fact. */
  readonly barrier: readonly string[];
  /** Every unique constraint that refuses a second use of the value. */
  readonly constraints: readonly string[];
  /** The value and start of this identity among the rows a barrier read fetched (undefined: its row is missing). */
  readonly fact: (rows: FactRows) => { readonly value: string; readonly start_id: string } | undefined;
}

/** The rows a barrier read fetches: the barrier, its four facts, and whether its RunEvent is among the events read. */
export interface FactRows {
  readonly barrier: BarrierRow;
  readonly audit: AuditEventRow | undefined;
  readonly trace: TraceAnchorRow | undefined;
  readonly receipt: AuditReceiptRow | undefined;
  readonly mutation: MutationRow | undefined;
  /** The RunEvent's own row was read (its JSON, naming the start, is checked against the barrier by the verifier). */
  readonly runEventRead: boolean;
}

const keyed = (row: { readonly start_id: string } | undefined, value: (r: never) => string) =>
  row === undefined ? undefined : { value: value(row as never), start_id: row.start_id };

export type IdentityTable = Readonly<Record<string, IdentityStorage>>;

const ATTEMPT_KEY = ['run_id', 'step_run_id', 'started_step_run_version'] as const;

export const IDENTITY_STORAGE: Readonly<Record<ReplayIdentity, IdentityStorage>> = {
  startId: {
    table: 'ql3.tool_execution_start_barriers',
    key: ['start_id'],
    startOf: 'f.start_id',
    barrier: ['start_id'],
    constraints: ['tool_execution_start_barriers_pkey'],
    fact: ({ barrier }) => ({ value: barrier.start_id, start_id: barrier.start_id }),
  },
  mutationId: {
    table: 'ql3.step_run_mutations',
    key: ['mutation_id'],
    startOf: 'f.start_id',
    barrier: ['mutation_id'],
    constraints: ['step_run_mutations_pkey'],
    fact: ({ mutation }) => keyed(mutation, (r: MutationRow) => r.mutation_id),
  },
  // its event id is refused by events_event_id_key (identityOfEventId)
  runEventId: {
    table: 'ql3.events',
    key: ['event_id'],
    startOf: "f.data_json::json ->> 'startId'",
    where: "f.event_type = 'StepRunStarted'",
    barrier: ['run_event_id'],
    constraints: [],
    fact: ({ barrier, runEventRead }) => (runEventRead ? { value: barrier.run_event_id, start_id: barrier.start_id } : undefined),
  },
  traceId: {
    table: 'ql3.trace_anchors',
    key: ['trace_id'],
    startOf: 'f.start_id',
    barrier: ['trace_id'],
    constraints: ['trace_anchors_pkey'],
    fact: ({ trace }) => keyed(trace, (r: TraceAnchorRow) => r.trace_id),
  },
  auditEventId: {
    table: 'ql3.security_audit_events',
    key: ['audit_event_id'],
    startOf: 'f.start_id',
    barrier: ['audit_event_id'],
    constraints: ['security_audit_events_pkey'],
    fact: ({ audit }) => keyed(audit, (r: AuditEventRow) => r.audit_event_id),
  },
  auditReceiptId: {
    table: 'ql3.audit_receipts',
    key: ['audit_receipt_id'],
    startOf: 'f.start_id',
    barrier: ['audit_receipt_id'],
    constraints: ['audit_receipts_pkey'],
    fact: ({ receipt }) => keyed(receipt, (r: AuditReceiptRow) => r.audit_receipt_id),
  },
  attempt: {
    table: 'ql3.tool_execution_start_barriers',
    key: ATTEMPT_KEY,
    startOf: 'f.start_id',
    barrier: ATTEMPT_KEY,
    constraints: ['tool_execution_start_barriers_attempt_key'],
    fact: ({ barrier: b }) => ({ value: attemptValue(b.run_id, b.step_run_id, Number(b.started_step_run_version)), start_id: b.start_id }),
  },
};

/**
 * The identity rows of one barrier read (R5.3): each identity's value and the start its keyed
 * row names, with that start's command digest (the barrier's when it names this start; none
 * otherwise, which the verifier refuses). A missing row gives no identity row.
 */
export const identityRowsOfFacts = (rows: FactRows, table: IdentityTable = IDENTITY_STORAGE): ReplayIdentityRow[] =>
  Object.entries(table).flatMap(([identity, s]) => {
    const found = s.fact(rows);
    if (found === undefined) return [];
    const command_digest = found.start_id === rows.barrier.start_id ? rows.barrier.command_digest : '';
    return [{ identity: identity as ReplayIdentity, value: found.value, start_id: found.start_id, command_digest }];
  });

/** The bound parameter that carries an identity's value: `auditEventId` -> `:audit_event_id`. */
export const paramOf = (identity: string): string => identity.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/**
 * The key of `s` equal to the value `value` (SQL): one column, or the attempt's three columns
 * against the elements of its canonical JSON array (projections/rows.ts attemptValue).
 */
const keyMatches = (s: IdentityStorage, value: string): string =>
  s.key.length === 1
    ? `f.${s.key[0]} = ${value}`
    : `(${s.key.map((c) => `f.${c}`).join(', ')}) = ((${value})::json ->> 0, (${value})::json ->> 1, ((${value})::json ->> 2)::bigint)`;

/** The canonical attempt's shape (identities hold only A-Z a-z 0-9 . _ -): a stored value that is not one (damage) is parsed by no probe. */
const ATTEMPT_SHAPE = `'^\\["[A-Za-z0-9._-]*","[A-Za-z0-9._-]*",[0-9]{1,18}\\]$'`;
/**
 * The rows of `s` keyed by a stored value, which may be damaged: an attempt that is not
 * canonical is filtered out first (OFFSET 0 keeps the filter before the parse) and matches none.
 */
const storedKeyRows = (s: IdentityStorage, value: string): string =>
  s.key.length === 1
    ? `${s.table} f WHERE ${keyMatches(s, value)}`
    : `(SELECT ${value} AS v WHERE ${value} ~ ${ATTEMPT_SHAPE} OFFSET 0) ok JOIN ${s.table} f ON ${keyMatches(s, 'ok.v')} WHERE true`;

/** One equality probe of an identity's unique key: (identity, value, start_id) of the row it finds. */
export const probeSql = (identity: string, s: IdentityStorage, value: string): string =>
  `SELECT '${identity}'::text AS identity, ${value}::text AS value, ${s.startOf} AS start_id FROM ${s.table} f WHERE ${keyMatches(s, value)}${s.where === undefined ? '' : ` AND ${s.where}`}`;

/**
 * R3.1: one probe of each identity's own unique key, in one statement, with the command digest
 * of the start each names (a row whose barrier is missing comes back with a NULL digest, which
 * the row codec refuses: fail closed). Each probe is an index lookup on its table's key.
 */
export const lookupReplaySql = (table: IdentityTable = IDENTITY_STORAGE): string => `SELECT i.identity, i.value, i.start_id, ib.command_digest
  FROM (${Object.entries(table)
    .map(([identity, s]) => probeSql(identity, s, `:${paramOf(identity)}`))
    .join('\n        UNION ALL ')}) i
  LEFT JOIN ql3.tool_execution_start_barriers ib ON ib.start_id = i.start_id`;

/**
 * The stored value of an identity, from the barrier row `alias`: its column, or the attempt key
 * as its canonical JSON (projections/rows.ts attemptValue: no spaces, strings JSON-escaped).
 */
export const barrierValueSql = (s: IdentityStorage, alias: string): string =>
  s.barrier.length === 1
    ? `${alias}.${s.barrier[0]}`
    : `format('[%s,%s,%s]', to_json(${alias}.run_id)::text, to_json(${alias}.step_run_id)::text, ${alias}.started_step_run_version)`;

/**
 * Recovery's lookup of one identity: the start its unique key names. `:key` is the value; the
 * attempt's key is matched by its parts (`:run_id`, `:step_run_id`, `:version`), as given.
 */
export const identityStartIdsSql = (storage: IdentityStorage): string =>
  storage.key.length === 1
    ? `SELECT ${storage.startOf} AS start_id FROM ${storage.table} f WHERE ${keyMatches(storage, ':key')}${storage.where === undefined ? '' : ` AND ${storage.where}`}`
    : `SELECT ${storage.startOf} AS start_id FROM ${storage.table} f WHERE (${storage.key.map((c) => `f.${c}`).join(', ')}) = (:run_id, :step_run_id, :version::bigint)`;

/** Each identity of the barrier row `alias`, as rows (identity, value): what compaction keeps of a start. */
export const barrierIdentitiesSql = (alias: string, table: IdentityTable = IDENTITY_STORAGE): string =>
  `(VALUES ${Object.entries(table)
    .map(([identity, s]) => `('${identity}', ${barrierValueSql(s, alias)})`)
    .join(', ')}) AS k (identity, value)`;

/**
 * Compaction's reuse guard, read back by verify: the compacted identities whose value a live
 * fact holds again (each compacted row probes its identity's key).
 */
export const liveCompactedSql = (table: IdentityTable = IDENTITY_STORAGE): string =>
  `SELECT c.identity, c.value FROM ql3.compacted_identities c WHERE ${Object.entries(table)
    .map(([identity, s]) => `(c.identity = '${identity}' AND EXISTS (SELECT 1 FROM ${storedKeyRows(s, 'c.value')}${s.where === undefined ? '' : ` AND ${s.where}`}))`)
    .join('\n     OR ')}`;

const EVENT_ID_DETAIL = /\(event_id\)=\(([^)]*)\)/;
const COMPACTED_DETAIL = /\(identity, value\)=\(([A-Za-z]+),/;

/**
 * The identity a unique violation names: an event id carries its identity as a prefix (rows.ts),
 * the compaction guard names it in the key, any other constraint is found in the table.
 * undefined: not an identity (a stream position taken under us).
 */
export const identityOfViolation = (
  violation: { readonly constraint?: string | undefined; readonly detail?: string | undefined },
  table: IdentityTable = IDENTITY_STORAGE,
): string | undefined => {
  const constraint = violation.constraint ?? '';
  if (constraint === 'events_event_id_key') return identityOfEventId(EVENT_ID_DETAIL.exec(violation.detail ?? '')?.[1] ?? '');
  if (constraint === 'compacted_identities_pkey') {
    const identity = COMPACTED_DETAIL.exec(violation.detail ?? '')?.[1];
    if (identity !== undefined && Object.hasOwn(table, identity)) return identity;
  }
  return Object.entries(table).find(([, s]) => s.constraints.includes(constraint))?.[0];
};
