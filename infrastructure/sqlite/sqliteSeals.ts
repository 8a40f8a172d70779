import type { EvidenceKeyring } from '../../application/evidenceKeys';
import { headBefore, originToWrite, requireSealedHead, sealEvents, type EventMacRow, type SealOriginRow, type SealedEventRow, type SealedSpan } from '../../application/eventSeals';
import type { ChainedCells } from '../../domain/eventChain';
import { nowMsOf, type Statements } from './statements';

// Keyed evidence over the Run stream on SQLite (R9.4, application/eventSeals.ts): the seal
// each appending transaction stores, and what a check of part of a stream reads.

/** The seals one keyed authority writes; the origin is looked for until a transaction sees it stored. */
export const sqliteSealer = (s: Statements, keys: EvidenceKeyring) => {
  let originStored = false;
  return (streamId: string, events: readonly ChainedCells[]): void => {
    if (events.length === 0) return;
    const head = headBefore(events);
    requireSealedHead(keys, streamId, readSealedSpan(s, streamId, head, head), head);
    if (!originStored) {
      const rows = s.sealOrigins.all() as SealOriginRow[];
      originStored = rows.some((r) => r.key_id === keys.activeKeyId);
      // The events being sealed are already in the log on the lifecycle path: sealing starts at the first of them, never after them.
      const globalPosition = (s.sealOriginPosition.get(streamId, Number(events[0]!.stream_position)) as { next: number }).next;
      // R14.1: legacy is what this transaction sees below the origin; a position free now never becomes legacy
      const gaps = (s.freePositionsBelow.all({ origin: globalPosition }) as { from_position: number; to_position: number }[]).map((g) => [g.from_position, g.to_position] as const);
      const fresh = { globalPosition, ms: nowMsOf(s), gaps };
      const origin = originToWrite(keys, rows, fresh);
      if (origin !== undefined) s.insertSealOrigin.run(origin);
    }
    s.insertEventMac.run(sealEvents(keys, streamId, events));
  };
};

/** The origins, the seals overlapping from..to, and the events those seals and from..to span. */
export const readSealedSpan = (s: Statements, streamId: string, from: number, to: number): SealedSpan => {
  const macs = s.eventMacsOver.all(streamId, to, from) as EventMacRow[];
  const lo = Math.min(from, ...macs.map((m) => m.from_position as number));
  const hi = Math.max(to, ...macs.map((m) => m.to_position as number));
  const origins = s.sealOrigins.all() as SealOriginRow[];
  const evidenceWithoutOrigin = origins.length === 0 && s.keyedEvidenceStored.get() !== undefined;
  return { origins, macs, events: s.streamEvents.all(streamId, lo, hi) as SealedEventRow[], evidenceWithoutOrigin };
};
