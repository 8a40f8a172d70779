import { canonicalJson } from './canonical';
import { provenPayload } from './checkRecords';
import { CorruptRecordError } from './errors';
import { decodeRunEvent, isRunEventType, type RunStreamEvent } from './events';
import type { StoredEvent } from './records';

// A row of the event log as every backend stores it, and how it is read back (R5.3): decoded
// strictly, its JSON canonical, or the read fails closed. `decodeEventRow` is the oracle that
// names what is wrong; `checkEventRow` gives its verdict in one pass when the row is good.

export interface EventRow {
  stream_id: string;
  stream_position: number;
  event_id: string;
  event_type: string;
  data_json: string;
  committed_at_ms: number;
}

/** Decode one stored event row strictly (JSON, codec, canonical form), or fail closed. */
export const decodeEventRow = (row: EventRow): RunStreamEvent => {
  const where = `${row.stream_id}@${row.stream_position}`;
  let data: unknown;
  try {
    data = JSON.parse(row.data_json);
  } catch {
    throw new CorruptRecordError('event', where, 'invalid JSON');
  }
  const event = decodeRunEvent(row.event_type, data, where);
  if (canonicalJson(event.data) !== row.data_json) throw new CorruptRecordError('event', where, 'stored JSON is not in canonical form');
  return event;
};

/** Positions of the five facts around the RunEvent sequence a barrier names. */
export const startEventPositions = (runEventSequence: number): number[] => [-3, -2, -1, 0, 1].map((d) => runEventSequence + d);

/** One stored event, proven in one pass, or undefined. */
export const provenEventRow = (row: EventRow): RunStreamEvent | undefined => {
  if (!isRunEventType(row.event_type)) return undefined;
  const data = provenPayload(row.event_type, row.data_json);
  return data === undefined ? undefined : ({ type: row.event_type, data } as RunStreamEvent);
};

/** Decode one stored event row strictly (R5.3): decodeEventRow's verdict and error, in one pass when it is good. */
export const checkEventRow = (row: EventRow): RunStreamEvent => provenEventRow(row) ?? decodeEventRow(row);

/** An event row read back as a `StoredEvent`, checked like any fact (R5.3). */
export const checkedStoredEventOf = (row: EventRow & { global_position: number }): StoredEvent => ({
  eventId: row.event_id,
  streamPosition: Number(row.stream_position),
  globalPosition: Number(row.global_position),
  committedAtMs: Number(row.committed_at_ms),
  event: checkEventRow(row),
});
