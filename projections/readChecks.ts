import { CorruptRecordError } from '../domain';
import type { EventRow } from './verifyRows';
import { checkedStoredEventOf } from './checkRows';
import type { StoredEvent } from '../application/authority';

// Checks every backend's read paths share (R9.3): a stream must be whole, and the two indexes
// of an attempt (the replay index and the barrier's own attempt columns) must agree. Each
// answers from what both sides say, never from whichever side happens to be present.

/** The events of one stream, in order: positions 1..n with no gap, and n equal to the head. */
export const wholeStream = (stream: string, headVersion: number | null, rows: readonly (EventRow & { global_position: number })[]): StoredEvent[] => {
  const version = headVersion ?? 0;
  if (version !== rows.length) throw new CorruptRecordError('stream', stream, `stream head is at version ${version} but it holds ${rows.length} events`);
  return rows.map((r, i) => {
    if (Number(r.stream_position) !== i + 1) throw new CorruptRecordError('stream', stream, `expected position ${i + 1}, found ${r.stream_position}`);
    return checkedStoredEventOf(r);
  });
};

/**
 * The start of one attempt, from the start ids the replay index binds to it and those the
 * barrier table's attempt columns hold: undefined when neither knows it, a typed error when they
 * disagree or either names more than one.
 */
export const agreedAttemptStart = (attempt: string, indexed: readonly string[], barriers: readonly string[]): string | undefined => {
  if (indexed.length > 1) throw new CorruptRecordError('replay index', attempt, `attempt is bound to ${indexed.length} barriers`);
  if (barriers.length > 1) throw new CorruptRecordError('start barrier', attempt, `${barriers.length} barriers claim this attempt`);
  if (indexed.length === 0 && barriers.length === 0) return undefined;
  if (indexed[0] !== barriers[0]) {
    throw new CorruptRecordError('replay index', attempt, `the index names start ${indexed[0] ?? '(none)'} but the barrier table names ${barriers[0] ?? '(none)'}`);
  }
  return indexed[0];
};
