import type {
  AuditEventRow,
  AuditReceiptRow,
  BarrierRow,
  MutationRow,
  RunRow,
  StepRunRow,
  TraceAnchorRow,
} from '../../projections/rows';
import type { StartWrite, StartWriteStep } from '../../application/startWrite';
import { barrierProbesSql, lookupReplaySql, missingBarrierProbeSql } from './identities';
import { named, prefixed, type NamedSql, type Params } from './named';

// SQL owned by the PostgreSQL backend, in schema ql3 (R5.2). Every value is a bound parameter
// (`:name`, see named.ts); statements are compiled once, here. INSERT column lists come from
// the projection row types, so a column can neither be forgotten nor misspelt.

export const SCHEMA = 'ql3';

// The transaction prelude, the Run turn and COMMIT live in transactionSql.ts; the migration
// runner's statements in migrationSql.ts.
export * from './transactionSql';
export * from './migrationSql';

// ------------------------------------------------------------------ R3.1 replay lookup

/** The identities of R4.1 in one statement, each an equality probe of the unique index. */
export const LOOKUP_REPLAY = named(lookupReplaySql());
/**
 * The same probes before BEGIN, with the Run's version at that moment (startWrite.ts): one row
 * per hit, or one row of NULLs, each carrying the version.
 */
export const LOOKUP_REPLAY_AT_VERSION = named(`SELECT v.run_version, l.identity, l.value, l.start_id, l.command_digest
  FROM (SELECT (SELECT version FROM ql3.runs WHERE run_id = :run_id) AS run_version) v
  LEFT JOIN (${lookupReplaySql()}) l ON true`);

// ------------------------------------------------------------------ R3.2 lock and read

/**
 * The Run head, its stream head and the StepRun. Inside a write transaction the Run's turn is
 * already held (the Run head row lock, taken by BEGIN's round trip, transactionSql.ts), and
 * only the event trigger moves these rows, so a plain read is the locked state (R3.2, R5.2).
 * The scalar subqueries each return NULL when their row does not exist.
 */
const RUN_STATE_CTES = `run AS (SELECT run_id, project_id, snapshot_id, snapshot_digest, version FROM ql3.runs WHERE run_id = :run_id),
  stream AS (SELECT version FROM ql3.streams WHERE stream_id = :stream_id),
  step AS (SELECT run_id, step_run_id, project_id, kind, status, version, digest, state_json
             FROM ql3.step_runs WHERE run_id = :run_id AND step_run_id = :step_run_id)`;
const runStateColumns = (gate: string) => `(SELECT row_to_json(run) FROM run${gate}) AS run,
       (SELECT version FROM stream${gate}) AS stream_version,
       (SELECT row_to_json(step) FROM step${gate}) AS step_run`;
export const READ_RUN_STATE = named(`WITH
  ${RUN_STATE_CTES}
SELECT ${runStateColumns('')}`);

// ------------------------------------------------------------------ R3.3 .. R3.7 as CTE steps

const cols = <R>(columns: readonly (keyof R & string)[]) => columns;
export const AUDIT_COLUMNS = cols<AuditEventRow>(['audit_event_id', 'start_id', 'run_id', 'step_run_id', 'audit_event_digest', 'committed_at_ms']);
export const TRACE_COLUMNS = cols<TraceAnchorRow>(['trace_id', 'span_id', 'start_id', 'run_id', 'step_run_id', 'trace_digest', 'committed_at_ms']);
export const RECEIPT_COLUMNS = cols<AuditReceiptRow>(['audit_receipt_id', 'audit_event_id', 'trace_id', 'start_id', 'receipt_digest', 'committed_at_ms']);
export const MUTATION_COLUMNS = cols<MutationRow>([
  'mutation_id', 'run_event_id', 'start_id', 'run_id', 'step_run_id', 'from_status', 'to_status', 'from_version', 'to_version',
  'run_event_sequence', 'mutation_digest', 'started_step_run_digest', 'requested_at_ms', 'committed_at_ms',
]);
export const BARRIER_COLUMNS = cols<BarrierRow>([
  'start_id', 'command_digest', 'barrier_digest', 'project_id', 'run_id', 'step_run_id', 'started_step_run_version',
  'started_step_run_digest', 'mutation_id', 'mutation_digest', 'run_event_id', 'trace_id', 'trace_digest', 'audit_event_id',
  'audit_receipt_id', 'audit_receipt_digest', 'adapter_id', 'committed_at_ms',
]);
export const RUN_COLUMNS = cols<RunRow>(['run_id', 'project_id', 'snapshot_id', 'snapshot_digest', 'version']);
export const STEP_RUN_COLUMNS = cols<StepRunRow>(['run_id', 'step_run_id', 'project_id', 'kind', 'status', 'version', 'digest', 'state_json']);

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

/** The events each step appends (application/startWrite.ts): the three evidence facts, the RunEvent, the barrier event. */
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
 * R3.4 and R3.5: the StepRun and the Run / stream heads move by the event trigger (pg-0036) as
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

/** R3.7: the barrier event, the immutable barrier row and its replay identities. */
const BARRIER: Step = {
  ctes: [
    ['barrier_event', insertEvents('barrier_event_', BARRIER_EVENTS)],
    ['barrier', insertRow('tool_execution_start_barriers', 'barrier_', BARRIER_COLUMNS)],
    [
      'identities',
      `INSERT INTO ql3.start_replay_identities (identity, value, start_id)
        SELECT i.identity, i.value, i.start_id
          FROM unnest(:identity_names::text[], :identity_values::text[], :identity_start_ids::text[]) AS i (identity, value, start_id)
        RETURNING 1`,
    ],
  ],
  params: ({ events, rows }) =>
    Object.assign(prefixed('barrier_', rows.barrier, eventParams('barrier_event_', BARRIER_EVENTS, events.barrier)), {
      identity_names: rows.identities.map((i) => i.identity),
      identity_values: rows.identities.map((i) => i.value),
      identity_start_ids: rows.identities.map((i) => i.start_id),
    }),
};

const STEPS: Readonly<Record<StartWriteStep, Step>> = { evidence: EVIDENCE, stepRunCas: STEP_RUN_CAS, runCas: RUN_CAS, runEvent: RUN_EVENT, barrier: BARRIER };

/** The row count each CTE of a start must report, from the plan; anything else rolls back. */
export const expectedCountOf = (plan: StartWrite, cte: string): number | undefined => {
  switch (cte) {
    case 'evidence_events':
      return plan.events.evidence.length;
    case 'identities':
      return plan.rows.identities.length;
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

/**
 * Everything a barrier read re-verifies, in one statement: the barrier row(s), the four fact
 * rows it names, the five events around its RunEvent, and every replay-identity row under one
 * of its identity values (duplicates included; each probe is an index lookup, so the read stays
 * constant-cost); with no barrier row, the start id's own probe, so that an index naming a
 * missing barrier fails closed. A row naming this start under a value the barrier does not
 * hold is verify's to find (pg-0051). Each probe is its own lateral index scan, as in the
 * replay lookup (identities.ts); the probes are distinct, so no row comes back twice. `probed`:
 * rows the statement already sends (READ_START's lookup); a key one of them matched is not
 * probed again (its rows are exactly those). Rows
 * travel as json (text-exact, never jsonb), the events' JSON as text (below).
 */
const barrierCtes = (gate: string, probed = '') => `b AS (SELECT * FROM ql3.tool_execution_start_barriers WHERE start_id = :start_id${gate}),
  anchor AS (SELECT e.stream_id, e.stream_position FROM ql3.events e JOIN b ON e.event_id = b.run_event_id),
  around AS (
    SELECT e.global_position, e.stream_id, e.stream_position, e.event_id, e.event_type, e.data_json, e.committed_at_ms,
           (e.stream_position - anchor.stream_position + 4)::int AS n
      FROM anchor JOIN ql3.events e ON e.stream_id = anchor.stream_id
                                   AND e.stream_position BETWEEN anchor.stream_position - 3 AND anchor.stream_position + 1),
  keys (identity, value) AS (
    ${barrierProbesSql()}
    UNION ALL ${missingBarrierProbeSql(gate)}),
  identities AS (
    SELECT i.identity, i.value, i.start_id, ib.command_digest
      FROM keys k CROSS JOIN LATERAL (SELECT p.identity, p.value, p.start_id FROM ql3.start_replay_identities p
                                       WHERE p.identity = k.identity AND p.value = k.value OFFSET 0) i
      LEFT JOIN ql3.tool_execution_start_barriers ib ON ib.start_id = i.start_id${
        probed === '' ? '' : `
     WHERE NOT EXISTS (SELECT 1 FROM ${probed} c WHERE c.identity = k.identity AND c.value = k.value)`
      })`;
/**
 * The events around the barrier's RunEvent (its three evidence facts before it, its barrier
 * event after it) travel as json without their JSON; each one's JSON is its own text column,
 * by its place in that order: the stored cell itself, parsed once, by the verifier (inside a
 * json aggregate it would be escaped by the server and parsed by the driver first).
 */
export const EVENTS_AROUND = 5;
export const EVENT_DATA_COLUMNS: readonly string[] = Array.from({ length: EVENTS_AROUND }, (_, i) => `event_data_${i + 1}`);
/** A replay-index row as it travels: a json array in this order (rowCodecs.ts). */
const IDENTITY_ROW = (alias: string) => `json_build_array(${alias}.identity, ${alias}.value, ${alias}.start_id, ${alias}.command_digest)`;
const BARRIER_READ_COLUMNS = `(SELECT json_agg(b) FROM b) AS barriers,
  (SELECT json_agg(a) FROM ql3.security_audit_events a WHERE a.audit_event_id IN (SELECT audit_event_id FROM b)) AS audits,
  (SELECT json_agg(t) FROM ql3.trace_anchors t WHERE t.trace_id IN (SELECT trace_id FROM b)) AS traces,
  (SELECT json_agg(r) FROM ql3.audit_receipts r WHERE r.audit_receipt_id IN (SELECT audit_receipt_id FROM b)) AS receipts,
  (SELECT json_agg(m) FROM ql3.step_run_mutations m WHERE m.mutation_id IN (SELECT mutation_id FROM b)) AS mutations,
  (SELECT json_agg(json_build_object('global_position', global_position, 'stream_id', stream_id, 'stream_position', stream_position,
                                     'event_id', event_id, 'event_type', event_type, 'committed_at_ms', committed_at_ms, 'n', n) ORDER BY n)
     FROM around) AS events,
  ${Array.from({ length: EVENTS_AROUND }, (_, i) => `(SELECT data_json FROM around WHERE n = ${i + 1}) AS ${EVENT_DATA_COLUMNS[i]}`).join(',\n  ')},
  (SELECT json_agg(${IDENTITY_ROW('identities')}) FROM identities) AS identities`;
export const READ_BARRIER = named(`WITH
  ${barrierCtes('')}
SELECT
  ${BARRIER_READ_COLUMNS}`);

/**
 * The first round trip of a start (startRoundTrips.ts), one statement and one snapshot, no lock:
 * the replay lookup of R3.1; when it found nothing, the Run, its stream head and the StepRun
 * (what the decision of R3.2 needs); when it found a hit (a replay or a conflict, never a new
 * start), every row a read of this start's barrier re-verifies, with its MAC row (R5.3, R9.4),
 * so that an exact replay needs no second round trip. On a replay the barrier's identity
 * values are the command's: each hit says whether it is also one of the barrier's probes, and
 * `identities` carries only the rows of the barrier's other values, so no row travels twice.
 */
export const READ_START = named(`WITH
  lookup AS (${lookupReplaySql()}),
  ${RUN_STATE_CTES},
  ${barrierCtes(' AND EXISTS (SELECT 1 FROM lookup)', 'lookup')}
SELECT (SELECT json_agg(json_build_array(l.identity, l.value, l.start_id, l.command_digest,
                                         EXISTS (SELECT 1 FROM keys k WHERE k.identity = l.identity AND k.value = l.value)))
          FROM lookup l) AS hits,
  ${runStateColumns(' WHERE NOT EXISTS (SELECT 1 FROM lookup)')},
  ${BARRIER_READ_COLUMNS},
  (SELECT json_agg(m) FROM ql3.start_evidence_macs m WHERE m.start_id = :start_id AND EXISTS (SELECT 1 FROM b)) AS macs`);

/** R3.2, R3.5: the Run turn and the Run version the start was decided on (pg-0045); the last attempt alone (pg-0052). */
export const TAKE_START_TURN = named('SELECT ql3.take_start_turn(:run_id, :expected_version::bigint, :alone::boolean) AS now_ms');

/** R5.4 lookup by attempt: the replay index and the barrier's own unique key must agree. */
export const FIND_ATTEMPT = named(`SELECT 'index' AS source, i.start_id FROM ql3.start_replay_identities i WHERE i.identity = 'attempt' AND i.value = :attempt
UNION ALL
SELECT 'barrier', b.start_id FROM ql3.tool_execution_start_barriers b
  WHERE b.run_id = :run_id AND b.step_run_id = :step_run_id AND b.started_step_run_version = :started_step_run_version`);

export const READ_STREAM = named(`SELECT
  (SELECT version FROM ql3.streams WHERE stream_id = :stream_id) AS stream_version,
  (SELECT json_agg(e ORDER BY e.stream_position) FROM ql3.events e WHERE e.stream_id = :stream_id) AS events`);

/** Keyed evidence (R9.4): the MAC row of one barrier, written and read only with a keyring. */
export const INSERT_EVIDENCE_MAC = named('INSERT INTO ql3.start_evidence_macs (start_id, key_id, mac) VALUES (:start_id, :key_id, :mac)');
export const SELECT_EVIDENCE_MACS = named('SELECT key_id, mac FROM ql3.start_evidence_macs WHERE start_id = :start_id');
