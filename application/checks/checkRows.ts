import { START_FACT_TYPES, streamNameOf, type DigestedBarrier, type StartFacts } from '../../domain';
import { barrierEventJsonOf, factsAgree, impliedFacts, impliedFactsHold, provenBarrier, provenPayload } from '../../domain/checkRecords';
import { startEventPositions, type EventRow } from '../../domain/eventRows';
import type { StoredBarrier } from '../../domain/records';
import { naturalEventIdOf, startRowsOf } from '../../projections/rows';
import { verifyStartRows, type StoredStartRows } from './verifyRows';

// The verified reads of every backend (R5.3), at the cost of one pass: each check of
// verifyStartRows and decodeEventRow asked once of the stored rows (checkRecords.ts says how).
// A proof that does not go through hands the rows to those verifiers, the oracle, which decide
// and name what is wrong: damaged rows fail with exactly the oracle's CorruptRecordError.

/** Numbers by value: pg hands BIGINT back as text unless told otherwise (as verifyRows' sameRow). */
const sameCell = (stored: unknown, want: unknown): boolean =>
  Object.is(typeof want === 'number' && typeof stored === 'string' && /^-?\d+$/.test(stored) ? Number(stored) : stored, want);

const sameRow = (stored: object | undefined, want: object): boolean => {
  if (stored === undefined) return false;
  const s = stored as Record<string, unknown>;
  for (const k in want) if (!sameCell(s[k], (want as Record<string, unknown>)[k])) return false;
  return true;
};

/** The barrier's text inside its event's data, cut out by bytes (the whole is compared again below), or undefined. */
const barrierTextIn = (data: unknown, digest: unknown): string | undefined => {
  if (typeof data !== 'string' || typeof digest !== 'string') return undefined;
  const head = '{"barrier":';
  const tail = `,"barrierDigest":${JSON.stringify(digest)}}`;
  return data.startsWith(head) && data.endsWith(tail) && data.length > head.length + tail.length ? data.slice(head.length, data.length - tail.length) : undefined;
};

const startFacts = (payloads: readonly unknown[], sealed: DigestedBarrier): StartFacts =>
  [
    ...payloads.map((data, i) => ({ type: START_FACT_TYPES[i]!, data })),
    { type: 'ToolExecutionStartBarrierCommitted', data: { barrier: sealed.record, barrierDigest: sealed.barrierDigest } },
  ] as unknown as StartFacts;

/**
 * The five facts, from the stored texts of the first four: in the common case, byte for byte
 * the ones the barrier implies (no parse, no decode); otherwise each parsed, decoded and
 * compared with the barrier field by field. Undefined when neither proves them.
 */
const proveFacts = (sealed: DigestedBarrier, audit: string, trace: string, receipt: string, mutation: string): StartFacts | undefined => {
  const implied = impliedFacts(sealed);
  const t = implied.texts;
  if (audit === t.audit && trace === t.trace && receipt === t.receipt && mutation === t.mutation) {
    return impliedFactsHold(sealed, implied) ? startFacts(implied.payloads, sealed) : undefined;
  }
  const texts = { audit, trace, receipt, mutation };
  const payloads = [audit, trace, receipt, mutation].map((text, i) => provenPayload(START_FACT_TYPES[i]!, text));
  if (payloads.some((p) => p === undefined)) return undefined;
  const facts = startFacts(payloads, sealed);
  return factsAgree(sealed, facts, texts) ? facts : undefined;
};

/** The barrier and its facts as verifyStartRows returns them, or undefined when the one pass cannot prove them. */
export const provenStartRows = (rows: StoredStartRows): StoredBarrier | undefined => {
  try {
    return prove(rows);
  } catch {
    // Rows of an unexpected shape (a cell of the wrong type): the oracle says what is wrong.
    return undefined;
  }
};

const prove = (rows: StoredStartRows): StoredBarrier | undefined => {
  const startId = rows.barrier.start_id;
  const events = rows.events;
  if (events.length !== 5) return undefined;
  const sealed = provenBarrier(startId, barrierTextIn(events[4]!.data_json, rows.barrier.barrier_digest), rows.barrier.barrier_digest);
  if (sealed === undefined) return undefined;
  const b = sealed.record;
  const stream = streamNameOf(b.runId);
  const positions = startEventPositions(b.runEvent.runEventSequence);
  const committedAtMs = Number(rows.barrier.committed_at_ms);
  for (let i = 0; i < 5; i++) {
    const e = events[i]!;
    if (e.stream_id !== stream || Number(e.stream_position) !== positions[i] || e.event_type !== START_FACT_TYPES[i] || Number(e.committed_at_ms) !== committedAtMs) return undefined;
  }
  const [e1, e2, e3, e4, e5] = events as [EventRow, EventRow, EventRow, EventRow, EventRow];
  // The barrier event by its bytes: the only canonical text of { barrier, barrierDigest }.
  if (e5.data_json !== barrierEventJsonOf(sealed)) return undefined;
  const facts = proveFacts(sealed, e1.data_json, e2.data_json, e3.data_json, e4.data_json);
  if (facts === undefined) return undefined;
  const texts = { audit: e1.data_json, trace: e2.data_json, receipt: e3.data_json, mutation: e4.data_json };
  for (let i = 0; i < 5; i++) if (events[i]!.event_id !== naturalEventIdOf(facts[i]!)) return undefined;

  const expected = startRowsOf(facts, committedAtMs, { ...texts, barrier: sealed.canonical });
  if (
    !sameRow(rows.barrier, expected.barrier) ||
    !sameRow(rows.audit, expected.audit) ||
    !sameRow(rows.trace, expected.trace) ||
    !sameRow(rows.receipt, expected.receipt) ||
    !sameRow(rows.mutation, expected.mutation)
  ) {
    return undefined;
  }
  if (rows.identities.length !== expected.identities.length) return undefined;
  for (const want of expected.identities) {
    let found: object | undefined;
    for (const r of rows.identities) {
      if (r.identity !== want.identity || r.value !== want.value) continue;
      if (found !== undefined) return undefined;
      found = r;
    }
    if (!sameRow(found, want)) return undefined;
  }
  return { record: b, barrierDigest: sealed.barrierDigest, committedAtMs };
};

/** R5.3 on every read of a barrier: proven in one pass, or judged (and explained) by verifyStartRows. */
export const checkStartRows = (rows: StoredStartRows): StoredBarrier => provenStartRows(rows) ?? verifyStartRows(rows);
