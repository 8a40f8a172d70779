import { AUDIT_COLUMNS, BARRIER_COLUMNS, MUTATION_COLUMNS, RECEIPT_COLUMNS, TRACE_COLUMNS } from './rowColumns';

// The parts of a barrier read (READ_BARRIER and READ_START, sql.ts) and the shape its rows
// travel in, which the reader (reads.ts) names again.

/**
 * Everything a barrier read re-verifies, in one statement: the barrier row(s), the four fact
 * rows it names and the five events around its RunEvent. The facts' own keys are the replay
 * identities (identities.ts), so the rows read here are also the identity rows the verifier
 * checks (reads.ts). Rows travel as json (text-exact, never jsonb), the events' JSON as text.
 */
export const barrierCtes = (gate: string) => `b AS (SELECT * FROM ql3.tool_execution_start_barriers WHERE start_id = :start_id${gate}),
  anchor AS (SELECT e.stream_id, e.stream_position FROM ql3.events e JOIN b ON e.event_id = b.run_event_id),
  around AS (
    SELECT e.global_position, e.stream_id, e.stream_position, e.event_id, e.event_type, e.data_json, e.committed_at_ms,
           (e.stream_position - anchor.stream_position + 4)::int AS n
      FROM anchor JOIN ql3.events e ON e.stream_id = anchor.stream_id
                                   AND e.stream_position BETWEEN anchor.stream_position - 3 AND anchor.stream_position + 1)`;
/**
 * The events around the barrier's RunEvent (its three evidence facts before it, its barrier
 * event after it) travel as json without their JSON; each one's JSON is its own text column,
 * by its place in that order: the stored cell itself, parsed once, by the verifier (inside a
 * json aggregate it would be escaped by the server and parsed by the driver first).
 */
export const EVENTS_AROUND = 5;
export const EVENT_DATA_COLUMNS: readonly string[] = Array.from({ length: EVENTS_AROUND }, (_, i) => `event_data_${i + 1}`);
/** The columns of an event around the RunEvent as it travels, after its place `n` (reads.ts). */
export const EVENT_AROUND_COLUMNS = ['global_position', 'stream_id', 'stream_position', 'event_id', 'event_type', 'committed_at_ms'] as const;
/**
 * A row as a barrier read sends it: a json array of these columns in this order, named again
 * by the reader (rowCodecs.ts decodeArrayRows), so the column names do not travel with every row.
 */
const asArray = (alias: string, columns: readonly string[]) => `json_build_array(${columns.map((c) => `${alias}.${c}`).join(', ')})`;
export const BARRIER_READ_COLUMNS = `(SELECT json_agg(${asArray('b', BARRIER_COLUMNS)}) FROM b) AS barriers,
  (SELECT json_agg(${asArray('a', AUDIT_COLUMNS)}) FROM ql3.security_audit_events a WHERE a.audit_event_id IN (SELECT audit_event_id FROM b)) AS audits,
  (SELECT json_agg(${asArray('t', TRACE_COLUMNS)}) FROM ql3.trace_anchors t WHERE t.trace_id IN (SELECT trace_id FROM b)) AS traces,
  (SELECT json_agg(${asArray('r', RECEIPT_COLUMNS)}) FROM ql3.audit_receipts r WHERE r.audit_receipt_id IN (SELECT audit_receipt_id FROM b)) AS receipts,
  (SELECT json_agg(${asArray('m', MUTATION_COLUMNS)}) FROM ql3.step_run_mutations m WHERE m.mutation_id IN (SELECT mutation_id FROM b)) AS mutations,
  (SELECT json_agg(${asArray('around', ['n', ...EVENT_AROUND_COLUMNS])} ORDER BY n) FROM around) AS events,
  ${Array.from({ length: EVENTS_AROUND }, (_, i) => `(SELECT data_json FROM around WHERE n = ${i + 1}) AS ${EVENT_DATA_COLUMNS[i]}`).join(',\n  ')}`;

/** The columns of ql3.read_barrier_rows (schema file): the barrier read above, with the MAC rows of its start. */
export const READ_BARRIER_ROWS_COLUMNS = ['barriers', 'audits', 'traces', 'receipts', 'mutations', 'events', ...EVENT_DATA_COLUMNS, 'macs'] as const;
/** The query ql3.read_barrier_rows runs (its parameter p_start_id): the schema file holds this text, a spec compares them. */
export const READ_BARRIER_ROWS_SQL = `WITH
  ${barrierCtes('')}
SELECT
  ${BARRIER_READ_COLUMNS},
  (SELECT json_agg(m) FROM ql3.start_evidence_macs m WHERE m.start_id = :start_id AND EXISTS (SELECT 1 FROM b)) AS macs`.replace(/:start_id/g, 'p_start_id');
