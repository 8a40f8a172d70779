import type { EvidenceKeyring } from '../../application/evidenceKeys';
import { headBefore, originToWrite, requireSealedHead, sealEvents, type SealedSpan } from '../../application/eventSeals';
import type { ChainedCells } from '../../domain/eventChain';
import type { Tables } from './tables';

// Keyed evidence over the Run stream in memory (R9.4, application/eventSeals.ts): the same
// rows as run_event_macs and run_event_seal_origins, keyed as their primary keys are.

/** Stores the seal of what one transaction appended to one stream (and the origin, the first time). */
export const sealMemoryEvents = (keys: EvidenceKeyring, t: Tables, streamId: string, events: readonly ChainedCells[], nowMs: number): void => {
  if (events.length === 0) return;
  const head = headBefore(events);
  requireSealedHead(keys, streamId, memorySealedSpan(t, streamId, head, head), head);
  // positions are the log's indexes: none below the next one is ever free
  const origin = originToWrite(keys, [...t.sealOrigins.values()], { globalPosition: t.events.length + 1, ms: nowMs, gaps: [] });
  if (origin !== undefined) t.sealOrigins.set(origin.key_id, origin);
  const row = sealEvents(keys, streamId, events);
  const key = `${streamId}\u0000${row.from_position}`;
  if (t.eventMacs.has(key)) throw new Error(`unique violation: event seal ${streamId}@${row.from_position}`);
  t.eventMacs.set(key, row);
};

/** The origins, the seals overlapping from..to, and the events they span (global position = order of insertion). */
export const memorySealedSpan = (t: Tables, streamId: string, from: number, to: number): SealedSpan => {
  const macs = [...t.eventMacs.values()].filter((m) => m.stream_id === streamId && Number(m.from_position) <= to && Number(m.to_position) >= from);
  const lo = Math.min(from, ...macs.map((m) => Number(m.from_position)));
  const hi = Math.max(to, ...macs.map((m) => Number(m.to_position)));
  const events = t.events.flatMap((e, i) => (e.stream_id === streamId && e.stream_position >= lo && e.stream_position <= hi ? [{ ...e, global_position: i + 1 }] : []));
  const evidenceWithoutOrigin = t.sealOrigins.size === 0 && (t.eventMacs.size > 0 || t.macs.size > 0);
  return { origins: [...t.sealOrigins.values()], macs, events: events.sort((a, b) => a.stream_position - b.stream_position), evidenceWithoutOrigin };
};
