import { isDeepStrictEqual } from 'node:util';
import { CorruptRecordError, START_FACT_TYPES, canonicalJson, streamNameOf, verifyStartFacts, verifyStoredBarrier, type StartFacts } from '../../domain';
import { decodeEventRow, startEventPositions, type EventRow } from '../../domain/eventRows';
import type { StoredBarrier } from '../../domain/records';
import { naturalEventIdOf, startRowsOf, type AuditEventRow, type AuditReceiptRow, type BarrierRow, type MutationRow, type ReplayIdentityRow, type TraceAnchorRow } from '../../projections/rows';

// R5.3 on every read, for both backends: re-derive every projected row from the event log
// and demand equality with what is stored. Mirror columns, fact tables, digests, the shared
// commit clock and the replay index are all checked by one comparison, so nothing can drift
// between SQLite and PostgreSQL.

export interface StoredStartRows {
  barrier: BarrierRow;
  audit: AuditEventRow | undefined;
  trace: TraceAnchorRow | undefined;
  receipt: AuditReceiptRow | undefined;
  mutation: MutationRow | undefined;
  /** The five event rows at positions runEventSequence-3 .. runEventSequence+1; their data is the one copy of each record's JSON. */
  events: readonly EventRow[];
  /** Every replay-index row naming this start. */
  identities: readonly ReplayIdentityRow[];
}

const sameRow = (stored: object, expected: object): string | undefined => {
  for (const [k, v] of Object.entries(expected)) {
    const s = (stored as Record<string, unknown>)[k];
    // pg returns BIGINT as string unless told otherwise; compare numbers by value.
    const normalised = typeof v === 'number' && typeof s === 'string' && /^-?\d+$/.test(s) ? Number(s) : s;
    if (!isDeepStrictEqual(normalised, v)) return k;
  }
  return undefined;
};

/** The barrier record inside the barrier event's data `{ barrier, barrierDigest }`, as canonical text. */
const barrierTextOfEvent = (startId: string, event: EventRow): string => {
  const none = (): never => {
    throw new CorruptRecordError('start barrier', startId, 'the barrier event holds no barrier record');
  };
  let data: unknown;
  try {
    data = JSON.parse(event.data_json);
  } catch {
    return none();
  }
  if (data === null || typeof data !== 'object' || Array.isArray(data) || !Object.hasOwn(data, 'barrier')) return none();
  try {
    return canonicalJson((data as { barrier: unknown }).barrier);
  } catch {
    return none();
  }
};

export const verifyStartRows = (rows: StoredStartRows): StoredBarrier => {
  const startId = rows.barrier.start_id;
  const bad = (problem: string): never => {
    throw new CorruptRecordError('start barrier', startId, problem);
  };
  if (rows.events.length !== 5) bad(`expected the 5 start facts in the event log, found ${rows.events.length}`);
  // The barrier's canonical JSON is stored once, in its event; decodeEventRow below proves
  // that event's bytes canonical, so the record is read from it as canonical text here.
  const sealed = verifyStoredBarrier(startId, barrierTextOfEvent(startId, rows.events[4]!), rows.barrier.barrier_digest);
  const b = sealed.record;
  const stream = streamNameOf(b.runId);
  const positions = startEventPositions(b.runEvent.runEventSequence);

  const decoded = rows.events.map((e, i) => {
    const where = `${e.stream_id}@${e.stream_position}`;
    if (e.stream_id !== stream || Number(e.stream_position) !== positions[i]) bad(`start fact ${i + 1} is not at ${stream}@${positions[i]}`);
    if (e.event_type !== START_FACT_TYPES[i]) bad(`expected ${START_FACT_TYPES[i]} at ${where}, found ${e.event_type}`);
    return decodeEventRow(e);
  });
  const facts = decoded as unknown as StartFacts;
  verifyStartFacts(sealed, facts);

  const committedAtMs = Number(rows.barrier.committed_at_ms);
  rows.events.forEach((e) => {
    if (Number(e.committed_at_ms) !== committedAtMs) bad(`event ${e.stream_id}@${e.stream_position} has another commit time than the barrier`);
  });
  rows.events.forEach((e, i) => {
    if (e.event_id !== naturalEventIdOf(facts[i]!)) bad(`event ${e.stream_id}@${e.stream_position} has event id ${e.event_id}, expected ${naturalEventIdOf(facts[i]!)}`);
  });

  // Event data 1-4 were just proven canonical (decodeEventRow), and the barrier event's record
  // equals the sealed one (verifyStartFacts), whose canonical text verifyStoredBarrier proved.
  const [e1, e2, e3, e4] = rows.events;
  const expected = startRowsOf(facts, committedAtMs, {
    audit: e1!.data_json,
    trace: e2!.data_json,
    receipt: e3!.data_json,
    mutation: e4!.data_json,
    barrier: sealed.canonical,
  });
  const compare = (name: string, stored: object | undefined, want: object) => {
    if (stored === undefined) bad(`${name} row is missing`);
    const column = sameRow(stored!, want);
    if (column !== undefined) bad(`${name}.${column} does not match the event log`);
  };
  compare('tool_execution_start_barriers', rows.barrier, expected.barrier);
  compare('security_audit_events', rows.audit, expected.audit);
  compare('trace_anchors', rows.trace, expected.trace);
  compare('audit_receipts', rows.receipt, expected.receipt);
  compare('step_run_mutations', rows.mutation, expected.mutation);

  if (rows.identities.length !== expected.identities.length) {
    bad(`replay index holds ${rows.identities.length} rows for this start, expected ${expected.identities.length}`);
  }
  for (const want of expected.identities) {
    const found = rows.identities.filter((r) => r.identity === want.identity && r.value === want.value);
    if (found.length !== 1) bad(`replay identity ${want.identity} is indexed ${found.length} times`);
    const column = sameRow(found[0]!, want);
    if (column !== undefined) bad(`replay identity ${want.identity}.${column} does not match the barrier`);
  }
  return { record: b, barrierDigest: sealed.barrierDigest, committedAtMs };
};
