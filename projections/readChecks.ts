import { CorruptRecordError } from '../domain';
import type { EventRow } from './verifyRows';
import { checkedStoredEventOf } from './checkRows';
import { eventChainDigest } from './eventChain';
import type { StoredEvent } from '../application/authority';

// Checks every backend's read paths share (R9.3): a stream must be whole, and the two indexes
// of an attempt (the replay index and the barrier's own attempt columns) must agree. Each
// answers from what both sides say, never from whichever side happens to be present.

/** An event row as a store reads it back: with its chain digest where the store keeps the chain (SQLite, PostgreSQL). */
export type ReadEventRow = EventRow & { readonly global_position: number; readonly chain_digest?: string | null };

/**
 * R9.2 on every read of a stream, not only in `verify`: each row must carry the chain digest
 * that binds it to the row before it (`previous`: the predecessor's stored digest, '' before
 * position 1), so a changed cell fails the read that returns it. A store that keeps no chain
 * (memory) reads its rows without a `chain_digest` field; a null one is damage.
 */
export const checkedChain = (stream: string, previous: string, rows: readonly ReadEventRow[]): void => {
  let link = previous;
  for (const r of rows) {
    if (r.chain_digest === undefined) return;
    if (r.chain_digest !== eventChainDigest(link, r)) {
      throw new CorruptRecordError('event', `${stream}@${r.stream_position}`, 'its chain digest does not bind it to the event before it: a cell of this event or of the one before it was changed (R9.2)');
    }
    link = r.chain_digest;
  }
};

/** The events of one stream, in order: positions 1..n with no gap, n equal to the head, each chained to the one before it. */
export const wholeStream = (stream: string, headVersion: number | null, rows: readonly ReadEventRow[]): StoredEvent[] => {
  const version = headVersion ?? 0;
  if (version !== rows.length) throw new CorruptRecordError('stream', stream, `stream head is at version ${version} but it holds ${rows.length} events`);
  rows.forEach((r, i) => {
    if (Number(r.stream_position) !== i + 1) throw new CorruptRecordError('stream', stream, `expected position ${i + 1}, found ${r.stream_position}`);
  });
  checkedChain(stream, '', rows);
  return rows.map(checkedStoredEventOf);
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
