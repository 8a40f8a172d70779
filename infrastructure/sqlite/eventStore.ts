import {
  assertExpectedVersionMatchesCurrent,
  type AppendToStreamOptions,
  type AppendToStreamResultWithGlobalPosition,
  type EventStore,
  type EventStoreSession,
  type ReadEvent,
  type ReadEventMetadataWithGlobalPosition,
  type ReadStreamOptions,
  type ReadStreamResult,
} from '@event-driven-io/emmett';
import { CorruptRecordError, ValidationError, type RunStreamEvent } from '../../domain';
import { agreedStreamVersion, checkedChain, checkedGlobalOrder, type ReadEventRow } from '../../application/checks/readChecks';
import { checkedStoredEventOf } from '../../domain/eventRows';
import type { RunEventStore } from '../../application/authority';
import type { StoredEvent } from '../../domain/records';
import { runAppendTransaction } from '../../application/lifecycleProtocol';
import type { Statements } from './statements';
import { streamHeadsOf } from './reads';
import { lifecycleUnitOfWork, type Sealer } from './writes';
import type { EvidenceKeyring } from '../../application/evidenceKeys';
import { requireSealedSpan } from '../../application/eventSeals';
import { readSealedSpan } from './sqliteSeals';

// The Run streams as emmett's `EventStore`, with a transactional session (`withSession`), so
// emmett's `CommandHandler` can drive orchestration's lifecycle in one `BEGIN IMMEDIATE`.


/** The authority's transactions: a snapshot read and a `BEGIN IMMEDIATE` write, one at a time. */
export interface SqliteTransactions {
  read<T>(body: () => T): Promise<T>;
  write<T>(body: () => Promise<T>): Promise<T>;
}

const runIdOfStream = (streamName: string): string => {
  if (!streamName.startsWith('run-')) throw new ValidationError('stream name', [{ path: '(root)', reason: 'invalid_value', message: `${streamName} is not a Run stream (run-<runId>)` }]);
  return streamName.slice(4);
};

/**
 * emmett's read range is stream positions and a count: whole numbers, 0 or more. Anything else
 * is bad input, named as such before the read: a negative `from` would otherwise look like a
 * range whose events are missing, that is, like damage.
 */
const checkedReadOptions = (options: ReadStreamOptions | undefined): void => {
  for (const key of ['from', 'to', 'maxCount'] as const) {
    const v: unknown = options?.[key];
    if (v === undefined) continue;
    const whole = (typeof v === 'bigint' && v >= 0n && v <= BigInt(Number.MAX_SAFE_INTEGER)) || (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0);
    if (!whole) throw new ValidationError('read options', [{ path: key, reason: 'invalid_value', message: `expected a whole number, 0 or more (got ${typeof v === 'bigint' ? `${v}n` : typeof v === 'number' ? String(v) : typeof v})` }]);
  }
  // a range that ends before it begins is a question about no events, not missing ones
  if (options?.to !== undefined && BigInt(options.to) < BigInt(options.from ?? 0n)) {
    throw new ValidationError('read options', [{ path: 'to', reason: 'invalid_value', message: `the range ends (${options.to}) before it begins (${options.from ?? 0})` }]);
  }
};

/** The stream's version, where its heads and its log agree (R9.3): a missing head or an event past it is damage, never a shorter stream. */
const currentVersion = (s: Statements, streamName: string): number => agreedStreamVersion(streamName, streamHeadsOf(s, runIdOfStream(streamName)));

const readStream = (s: Statements, streamName: string, options: ReadStreamOptions | undefined, keys: EvidenceKeyring | undefined): ReadStreamResult<RunStreamEvent, ReadEventMetadataWithGlobalPosition> => {
  runIdOfStream(streamName);
  checkedReadOptions(options);
  const current = currentVersion(s, streamName);
  assertExpectedVersionMatchesCurrent(BigInt(current), options?.expectedStreamVersion, 0n);
  const from = Number(options?.from ?? 0n);
  const to = Number(options?.to ?? (options?.maxCount !== undefined ? BigInt(from) + options.maxCount : BigInt(current)));
  // From the event before the range: its chain digest is the one the first event read binds (R9.2).
  const rows = s.streamEvents.all(streamName, Math.max(from, 1), to) as ReadEventRow[];
  const before = from > 0 ? rows.shift() : undefined;
  if (from > 0 && from <= current && Number(before?.stream_position) !== from) throw new CorruptRecordError('stream', streamName, `event ${from} is missing`);
  rows.forEach((r, i) => {
    if (Number(r.stream_position) !== from + 1 + i) throw new CorruptRecordError('stream', streamName, `expected position ${from + 1 + i}, found ${r.stream_position}`);
  });
  if (rows.length !== Math.max(0, Math.min(to, current) - from)) throw new CorruptRecordError('stream', streamName, `stream head is at version ${current} but events ${from + 1}..${Math.min(to, current)} are not all there`);
  checkedGlobalOrder(streamName, before === undefined ? rows : [before, ...rows]);
  checkedChain(streamName, before?.chain_digest ?? '', rows);
  // R9.4: with a keyring the events read are sealed, or legacy (before the seal origin)
  if (keys !== undefined && rows.length > 0) requireSealedSpan(keys, streamName, readSealedSpan(s, streamName, from + 1, to), from + 1, to);
  const events = rows.map((r) => {
    const stored = checkedStoredEventOf(r);
    return {
      ...stored.event,
      kind: 'Event',
      metadata: { streamName, messageId: r.event_id, streamPosition: BigInt(r.stream_position), globalPosition: BigInt(r.global_position) },
    } as unknown as ReadEvent<RunStreamEvent, ReadEventMetadataWithGlobalPosition>;
  });
  return { currentStreamVersion: BigInt(current), events, streamExists: current > 0 };
};

const append = async (s: Statements, streamName: string, events: { type: string; data: unknown }[], options: AppendToStreamOptions | undefined, seal: Sealer | undefined, keys: EvidenceKeyring | undefined): Promise<AppendToStreamResultWithGlobalPosition> => {
  const stored: StoredEvent[] = [];
  const { before, after } = await runAppendTransaction(lifecycleUnitOfWork(s, stored, seal, keys), runIdOfStream(streamName), events, options?.expectedStreamVersion);
  return {
    nextExpectedStreamVersion: BigInt(after.run!.version),
    createdNewStream: before.run === null,
    lastEventGlobalPosition: BigInt(stored[stored.length - 1]?.globalPosition ?? 0),
  };
};

/**
 * Every expected-version mode is enforced; start facts can only be appended by
 * `barriers.prepare`. `session`: already inside a transaction (withSession's callback).
 */
export const createRunEventStore = (s: Statements, tx: SqliteTransactions, session = false, seal?: Sealer, keys?: EvidenceKeyring): RunEventStore => {
  const read = <T>(body: () => T): Promise<T> => (session ? Promise.resolve().then(body) : tx.read(body));
  const write = <T>(body: () => Promise<T>): Promise<T> => (session ? body() : tx.write(body));
  const store: RunEventStore = {
    readStream: ((streamName: string, options?: ReadStreamOptions) => read(() => readStream(s, streamName, options, keys))) as RunEventStore['readStream'],
    aggregateStream: (async (streamName: string, options: { evolve: (s: unknown, e: unknown) => unknown; initialState: () => unknown; read?: ReadStreamOptions }) => {
      const result = await read(() => readStream(s, streamName, options.read, keys));
      return { currentStreamVersion: result.currentStreamVersion, streamExists: result.streamExists, state: result.events.reduce(options.evolve, options.initialState()) };
    }) as unknown as RunEventStore['aggregateStream'],
    appendToStream: ((streamName: string, events: { type: string; data: unknown }[], options?: AppendToStreamOptions) =>
      write(() => append(s, streamName, events, options, seal, keys))) as unknown as RunEventStore['appendToStream'],
    streamExists: (streamName: string) => read(() => currentVersion(s, streamName) > 0),
    withSession: <T>(callback: (session: EventStoreSession<EventStore<ReadEventMetadataWithGlobalPosition>>) => Promise<T>): Promise<T> =>
      session
        ? callback({ eventStore: store, close: async () => undefined })
        : tx.write(() => callback({ eventStore: createRunEventStore(s, tx, true, seal, keys), close: async () => undefined })),
  };
  return store;
};
