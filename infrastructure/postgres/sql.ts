import type { StartWrite, StartWriteStep } from '../../application/startWritePlan';
import { lookupReplaySql } from './identities';
import { AUDIT_COLUMNS, BARRIER_COLUMNS, MUTATION_COLUMNS, RECEIPT_COLUMNS, TRACE_COLUMNS } from './rowColumns';
import { BARRIER_READ_COLUMNS, READ_BARRIER_ROWS_COLUMNS, barrierCtes } from './barrierReadSql';
import { sealedSpanColumns, sealedSpanCtes } from './sealedSpanSql';
import { named, prefixed, type NamedSql, type Params } from './named';
import { lastStepRunEventColumn, RUN_STATE_CTES, runStateColumns } from './runStateSql';

// SQL owned by the PostgreSQL backend, in schema ql3 (R5.2). Every value is a bound parameter
// (`:name`, see named.ts); statements are compiled once, here. INSERT column lists come from
// the projection row types (rowColumns.ts), so a column can neither be forgotten nor misspelt.

export const SCHEMA = 'ql3';

// The transaction prelude, the Run turn and COMMIT live in transactionSql.ts; the migration
// runner's statements in migrationSql.ts.
export * from './transactionSql';
export * from './migrationSql';
export * from './rowColumns';
export * from './barrierReadSql';
export * from './runStateSql';

// ------------------------------------------------------------------ R3.1 replay lookup

/** The identities of R4.1 in one statement, each an equality probe of its fact's unique key. */
export const LOOKUP_REPLAY = named(lookupReplaySql());
/**
 * The same probes before BEGIN, with the Run's version at that moment (startWrite.ts): one row
 * per hit, or one row of NULLs, each carrying the version.
 */
export const LOOKUP_REPLAY_AT_VERSION = named(`SELECT v.run_version, l.identity, l.value, l.start_id, l.command_digest
  FROM (SELECT (SELECT version FROM ql3.runs WHERE run_id = :run_id) AS run_version) v
  LEFT JOIN (${lookupReplaySql()}) l ON true`);

// ------------------------------------------------------------------ R3.3 .. R3.7 as CTE steps

const insertRow = (table: string, prefix: string, columns: readonly string[]) =>
  `INSERT INTO ql3.${table} (${columns.join(', ')}) VALUES (${columns.map((c) => `:${prefix}${c}`).join(', ')}) RETURNING 1`;

/**
 * Events appended together: parallel arrays, one element per event, positions given by the
 * caller. `data` is the SQL of the JSON texts, in the same order.
 */
const insertEventsFrom = (prefix: string, data: string) => `INSERT INTO ql3.events (stream_id, stream_position, event_id, event_type, data_json, committed_at_ms)
    SELECT :stream_id, e.position, e.event_id, e.event_type, e.data_json, :committed_at_ms::bigint
      FROM unnest(:${prefix}positions::bigint[], :${prefix}event_ids::text[], :${prefix}event_types::text[], ${data})
           AS e (position, event_id, event_type, data_json)
    RETURNING 1`;

/**
 * The events of one step of a start, which always appends `count` of them: each event's JSON is
 * its own text parameter, not an element of a text[], so its quotes and backslashes are not
 * escaped for array syntax (and, in the write round trip, it goes verbatim, roundTripSql.ts).
 */
const insertEvents = (prefix: string, count: number) =>
  insertEventsFrom(prefix, `ARRAY[${Array.from({ length: count }, (_, i) => `:${prefix}data_${i}::text`).join(', ')}]`);

/** The parameter names of each step's JSON texts, made once. */
const dataNames = new Map<string, readonly string[]>();
const dataNamesOf = (prefix: string, count: number): readonly string[] => {
  let names = dataNames.get(prefix);
  if (names === undefined || names.length !== count) dataNames.set(prefix, (names = Array.from({ length: count }, (_, i) => `${prefix}data_${i}`)));
  return names;
};

/** One step of the start: named CTEs, and the parameters it binds from the write plan. */
interface Step {
  readonly ctes: readonly (readonly [name: string, body: string])[];
  readonly params: (plan: StartWrite) => Params;
}

/** Events of one step, as `insertEvents(prefix, count)` binds them; a step appends exactly its count. */
const eventParams = (prefix: string, count: number, events: StartWrite['events'][keyof StartWrite['events']]): Record<string, unknown> => {
  if (events.length !== count) throw new Error(`a start appends ${count} ${prefix.slice(0, -1)} event(s), not ${events.length}`);
  const params: Record<string, unknown> = {
    [`${prefix}positions`]: events.map((e) => e.position),
    [`${prefix}event_ids`]: events.map((e) => e.eventId),
    [`${prefix}event_types`]: events.map((e) => e.type),
  };
  const names = dataNamesOf(prefix, count);
  for (let i = 0; i < count; i++) params[names[i]!] = events[i]!.dataJson;
  return params;
};

/** The events each step appends (application/startWritePlan.ts): the three evidence facts, the RunEvent, the barrier event. */
const EVIDENCE_EVENTS = 3;
const RUN_EVENT_EVENTS = 1;
const BARRIER_EVENTS = 1;

/** What every step binds: the stream, the Run, the StepRun and the transaction clock. */
const commonParams = (plan: StartWrite): Params => ({
  stream_id: plan.streamId,
  run_id: plan.runId,
  step_run_id: plan.stepRunId,
  committed_at_ms: plan.committedAtMs,
});

/** R3.3: SecurityAuditEvent, Trace anchor, Audit receipt (their three events and fact rows). */
const EVIDENCE: Step = {
  ctes: [
    ['evidence_events', insertEvents('evidence_', EVIDENCE_EVENTS)],
    ['audit', insertRow('security_audit_events', 'audit_', AUDIT_COLUMNS)],
    ['trace', insertRow('trace_anchors', 'trace_', TRACE_COLUMNS)],
    ['receipt', insertRow('audit_receipts', 'receipt_', RECEIPT_COLUMNS)],
  ],
  params: (plan) =>
    prefixed('receipt_', plan.rows.receipt, prefixed('trace_', plan.rows.trace, prefixed('audit_', plan.rows.audit, eventParams('evidence_', EVIDENCE_EVENTS, plan.events.evidence)))),
};

/**
 * R3.4 and R3.5: the StepRun and the Run / stream heads move by the event trigger as
 * the StepRunStarted and the other facts are inserted, each a compare-and-set on the head the
 * event names (status, version and digest of the StepRun; the stream position): the runtime
 * role has no UPDATE. The steps stay in the plan (the fault hook still runs between them).
 */
const STEP_RUN_CAS: Step = { ctes: [], params: () => ({}) };
const RUN_CAS: Step = { ctes: [], params: () => ({}) };

/** R3.6: the RunEvent and its mutation-ledger entry. */
const RUN_EVENT: Step = {
  ctes: [
    ['run_event', insertEvents('run_event_', RUN_EVENT_EVENTS)],
    ['mutation', insertRow('step_run_mutations', 'mutation_', MUTATION_COLUMNS)],
  ],
  params: (plan) => prefixed('mutation_', plan.rows.mutation, eventParams('run_event_', RUN_EVENT_EVENTS, plan.events.runEvent)),
};

/** R3.7: the barrier event and the immutable barrier row, whose insert checks that every fact it names is its own. */
const BARRIER: Step = {
  ctes: [
    ['barrier_event', insertEvents('barrier_event_', BARRIER_EVENTS)],
    ['barrier', insertRow('tool_execution_start_barriers', 'barrier_', BARRIER_COLUMNS)],
  ],
  params: ({ events, rows }) => prefixed('barrier_', rows.barrier, eventParams('barrier_event_', BARRIER_EVENTS, events.barrier)),
};

const STEPS: Readonly<Record<StartWriteStep, Step>> = { evidence: EVIDENCE, stepRunCas: STEP_RUN_CAS, runCas: RUN_CAS, runEvent: RUN_EVENT, barrier: BARRIER };

/** The row count each CTE of a start must report, from the plan; anything else rolls back. */
export const expectedCountOf = (plan: StartWrite, cte: string): number | undefined => {
  switch (cte) {
    case 'evidence_events':
      return plan.events.evidence.length;
    default:
      return STEP_CTE_NAMES.has(cte) ? 1 : undefined;
  }
};
const STEP_CTE_NAMES = new Set(Object.values(STEPS).flatMap((s) => s.ctes.map(([name]) => name)));

function statementOf(steps: readonly Step[]): NamedSql;
function statementOf(steps: readonly Step[]): NamedSql | null;
function statementOf(steps: readonly Step[]): NamedSql | null {
  const ctes = steps.flatMap((s) => s.ctes);
  if (ctes.length === 0) return null;
  return named(
    `WITH ${ctes.map(([name, body]) => `${name} AS (${body})`).join(',\n')}
SELECT ${ctes.map(([name]) => `(SELECT count(*) FROM ${name})::int AS ${name}`).join(', ')}`,
  );
}

/** `stepwise`: one statement per step of R3, the fault-injection hook between each (null: the trigger's step). */
export const START_STEP_STATEMENTS: Readonly<Record<StartWriteStep, NamedSql | null>> = {
  evidence: statementOf([EVIDENCE]),
  stepRunCas: statementOf([STEP_RUN_CAS]),
  runCas: statementOf([RUN_CAS]),
  runEvent: statementOf([RUN_EVENT]),
  barrier: statementOf([BARRIER]),
};

/**
 * `batched` (the default): R3.3 .. R3.7 as one statement, one round trip. PostgreSQL runs a
 * statement atomically and checks its foreign keys at its end, so no intermediate state of the
 * five steps is ever observable; the counts prove each step wrote exactly what it should.
 */
export const START_BATCHED_STATEMENT: NamedSql = statementOf([EVIDENCE, STEP_RUN_CAS, RUN_CAS, RUN_EVENT, BARRIER])!;

/** The parameters of these steps of the plan, for their statement. */
export const startParams = (plan: StartWrite, steps: readonly StartWriteStep[]): Params =>
  Object.assign({}, commonParams(plan), ...steps.map((step) => STEPS[step].params(plan))) as Params;

// ------------------------------------------------------------------ lifecycle appends

export const INSERT_EVENTS_SQL = insertEventsFrom('', ':data::text[]').replace('RETURNING 1', 'RETURNING global_position, stream_position, event_id');
export const INSERT_EVENTS = named(INSERT_EVENTS_SQL);

// ------------------------------------------------------------------ reads (R5.3 on every one)

/** With no barrier row, the StepRun mutation rows naming the start come back too (R9.3): null is an answer only when none does. */
export const READ_BARRIER = named(`WITH
  ${barrierCtes('')}
SELECT
  ${BARRIER_READ_COLUMNS},
  (SELECT count(*) FROM ql3.step_run_mutations m WHERE m.start_id = :start_id AND NOT EXISTS (SELECT 1 FROM b)) AS mutations_naming_start,
  (SELECT count(*) FROM ql3.events e WHERE e.event_id = 'barrier:' || :start_id AND NOT EXISTS (SELECT 1 FROM b)) AS log_naming_start`);

/**
 * READ_START_KEYED's sealed span (sealedSpanSql.ts) is over the stream's head (HEAD) and read
 * only for a new start. A keyed start then checks the head it follows is sealed (R9.4,
 * application/eventSeals.ts) in the same read, in the same snapshot as the Run state.
 */
const KEYED_NEW_START = 'NOT EXISTS (SELECT 1 FROM lookup)';
const HEAD = '(SELECT version FROM stream)';
/**
 * The first round trip of a start (startRead.ts, roundTripStart.ts), one statement and one snapshot, no lock:
 * the replay lookup of R3.1; when it found nothing, the Run, its stream head and the StepRun
 * (what the decision of R3.2 needs); when it found a hit (a replay or a conflict, never a new
 * start), every row a read of this start's barrier re-verifies, with its MAC row (R5.3, R9.4),
 * so that an exact replay needs no second round trip. Those rows come from
 * ql3.read_barrier_rows (the barrier read of barrierReadSql.ts, in the schema), called only
 * behind the lookup's hit: a new start's read never builds the barrier read.
 */
const readStartSql = (keyed: boolean): NamedSql =>
  named(`WITH
  lookup AS (${lookupReplaySql()}),
  ${RUN_STATE_CTES}${keyed ? `,\n  ${sealedSpanCtes(HEAD, HEAD, KEYED_NEW_START)}` : ''}
SELECT (SELECT json_agg(json_build_array(l.identity, l.value, l.start_id, l.command_digest)) FROM lookup l) AS hits,
  ${runStateColumns(' WHERE NOT EXISTS (SELECT 1 FROM lookup)', false)},
  ${lastStepRunEventColumn(' AND NOT EXISTS (SELECT 1 FROM lookup)')},
  ${READ_BARRIER_ROWS_COLUMNS.map((c) => `br.${c}`).join(', ')},
  ${keyed ? sealedSpanColumns(KEYED_NEW_START, 'seal_') : UNSEALED_SPAN_COLUMNS}
  FROM (VALUES (1)) AS one (x)
  LEFT JOIN LATERAL (SELECT * FROM ql3.read_barrier_rows(:start_id) WHERE EXISTS (SELECT 1 FROM lookup)) br ON true`);
/**
 * An unkeyed store's start reads no sealed span: the columns a keyed read fills, empty. A
 * statement of its own, not the keyed one behind a false gate: PostgreSQL builds every node of
 * a prepared plan on each execution, gated or not, and the span's were a third of this one's.
 */
const UNSEALED_SPAN_COLUMNS = `'[]'::json AS seal_macs, '[]'::json AS seal_events, '[]'::json AS seal_origins, false AS seal_evidence_without_origin`;
export const READ_START = readStartSql(false);
export const READ_START_KEYED = readStartSql(true);

/** The events of one type in one Run stream, in order: the log's own record of every attempt (StepRunStarted) or StepRun (StepRunCreated). */
export const STREAM_EVENTS_OF_TYPE = named(`SELECT global_position, stream_id, stream_position, event_id, event_type, data_json, committed_at_ms FROM ql3.events
  WHERE stream_id = :stream_id AND event_type = :event_type ORDER BY stream_position`);

/** A Run's two heads and the last position its log holds (a unique hit on a position the heads call free). */
export const HEADS_AND_LOG_END = named(`SELECT (SELECT version FROM ql3.streams WHERE stream_id = :stream_id) AS stream_version,
  (SELECT version FROM ql3.runs WHERE run_id = :run_id) AS run_version,
  (SELECT max(stream_position) FROM ql3.events WHERE stream_id = :stream_id) AS logged`);

/** R3.2, R3.5: the Run turn and the Run version the start was decided on; the last attempt alone. */
export const TAKE_START_TURN = named('SELECT ql3.take_start_turn(:run_id, :expected_version::bigint, :alone::boolean) AS now_ms');

/** R5.4 lookup by attempt: the barrier's unique attempt key. */
export const FIND_ATTEMPT = named(`SELECT b.start_id FROM ql3.tool_execution_start_barriers b
  WHERE b.run_id = :run_id AND b.step_run_id = :step_run_id AND b.started_step_run_version = :started_step_run_version`);

/** What a Run's log is checked against (agreedStreamVersion): both heads, the StepRun heads' versions, its barriers. */
const RUN_HEAD_COLUMNS = `(SELECT version FROM ql3.streams WHERE stream_id = :stream_id) AS stream_version,
  (SELECT version FROM ql3.runs WHERE run_id = :run_id) AS run_version,
  (SELECT coalesce(sum(version), 0) FROM ql3.step_runs WHERE run_id = :run_id) AS step_run_events,
  (SELECT count(*) FROM ql3.tool_execution_start_barriers WHERE run_id = :run_id) AS starts`;
export const READ_STREAM = named(`SELECT ${RUN_HEAD_COLUMNS},
  (SELECT json_agg(e ORDER BY e.stream_position) FROM ql3.events e WHERE e.stream_id = :stream_id) AS events`);
/** The same heads and where the log ends, without the events (recovery's check of a Run, R9.3). */
export const RUN_HEADS = named(`SELECT ${RUN_HEAD_COLUMNS},
  (SELECT max(stream_position) FROM ql3.events WHERE stream_id = :stream_id) AS log_end`);

/** Keyed evidence (R9.4): the MAC row of one barrier, written and read only with a keyring. */
export const INSERT_EVIDENCE_MAC = named('INSERT INTO ql3.start_evidence_macs (start_id, key_id, mac) VALUES (:start_id, :key_id, :mac)');
export const SELECT_EVIDENCE_MACS = named('SELECT key_id, mac FROM ql3.start_evidence_macs WHERE start_id = :start_id');
