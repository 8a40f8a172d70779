import { CorruptRecordError, canonicalJson } from '../domain';
import { eventChainDigest, type ChainedCells } from '../domain/eventChain';
import type { StoredEvent } from '../domain/records';
import { printableKeyId, type EvidenceKeyring, type MacCheck } from './evidenceKeys';
import type { StartWrite } from './startWritePlan';

// Keyed evidence over the whole Run stream (R9.4). With a deployment keyring, every
// transaction that appends Run events (a start, a lifecycle command, a resolution) stores one
// seal: HMAC-SHA-256, under the active key, over the positions it appended and every cell of
// those events (folded the way the chain folds them, domain/eventChain.ts). A writer
// with INSERT rights but without the key can still append a legal event, but not its seal, so
// every verified read that depends on it and `verify` find it unsealed.
//
// Events written before the first keyed writer are legacy: the first keyed transaction stores
// a sealed origin (the global position and database time it starts from, and every position
// below it that held no event in that transaction's snapshot). Legacy is that frozen set: an
// event before both, at a position that was taken when the origin was written, ahead of every
// sealed event of its stream. Whatever an INSERT can choose (a position left free below the
// origin, a clock from a transaction opened before it) cannot put an event into it: a position
// taken at keying holds its event for ever, so no later insert lands there. A store no keyed
// writer has touched has no origin, and all of its events are legacy.

const RANGE_TAG = 'qinglong/run-event-seal@v1';
// v2 binds the free positions below the origin; a v1 origin (which did not) verifies under no key.
const ORIGIN_TAG = 'qinglong/run-event-seal-origin@v2';

/** One seal row: the stream positions from..to one transaction appended. */
export interface EventMacRow {
  readonly stream_id: string;
  readonly from_position: number | string;
  readonly to_position: number | string;
  readonly key_id: string;
  readonly mac: string;
}

/** Where sealing starts, sealed itself; one row per key id (a rotation re-seals the same origin). */
export interface SealOriginRow {
  readonly key_id: string;
  readonly from_global_position: number | string;
  readonly from_ms: number | string;
  /** JSON `[[from, to], ...]`, ascending: the positions below the origin that held no event when it was written. */
  readonly legacy_gaps: string;
  readonly mac: string;
}

/** Where a fresh origin starts, and the free positions below it in the same snapshot. */
export interface FreshOrigin {
  readonly globalPosition: number;
  readonly ms: number;
  readonly gaps: readonly (readonly [number, number])[];
}

export type SealedEventRow = ChainedCells & { readonly global_position: number | string };

/** What a check of positions from..to of one stream reads: the origins, the seals that overlap, the events they span. */
export interface SealedSpan {
  readonly origins: readonly SealOriginRow[];
  readonly macs: readonly EventMacRow[];
  readonly events: readonly SealedEventRow[];
  /**
   * Keyed evidence (an event seal or a start's evidence MAC) is stored while no seal origin row
   * is: the first keyed transaction stores its origin with its seals, so only damage makes this.
   */
  readonly evidenceWithoutOrigin: boolean;
}

export interface SealFinding {
  readonly record: string;
  readonly problem: string;
}

/**
 * Every cell the writer decides; committed_at_ms is left out because PostgreSQL stamps it in
 * the statement itself (R3.10), after the seal is made. The chain binds it (R9.2), and a
 * writer with INSERT rights alone cannot change a stored event.
 */
const rangeInput = (streamId: string, from: number, to: number, events: readonly ChainedCells[]): string =>
  `${RANGE_TAG}\n${streamId}\n${from}\n${to}\n${events.reduce((previous, e) => eventChainDigest(previous, { ...e, committed_at_ms: 0 }), '')}`;

const originInput = (fromGlobalPosition: number, fromMs: number, gaps: string): string => `${ORIGIN_TAG}\n${fromGlobalPosition}\n${fromMs}\n${gaps}`;

type Gaps = readonly (readonly [number, number])[];

/** Parsed gap lists by origin and text: every keyed read checks the origin, and the list is fixed once written. */
const parsedGaps = new Map<string, Gaps | undefined>();

/** The gap list as stored: ascending, disjoint ranges inside 1..origin-1, or undefined when it is not that. */
const gapsOf = (text: string, origin: number): Gaps | undefined => {
  if (text === '[]') return [];
  const key = `${origin}\n${text}`;
  if (parsedGaps.has(key)) return parsedGaps.get(key);
  const gaps = parseGaps(text, origin);
  if (parsedGaps.size >= 16) parsedGaps.clear();
  parsedGaps.set(key, gaps);
  return gaps;
};

const parseGaps = (text: string, origin: number): Gaps | undefined => {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed)) return undefined;
  let after = 0;
  for (const r of parsed) {
    if (!Array.isArray(r) || r.length !== 2 || !Number.isSafeInteger(r[0]) || !Number.isSafeInteger(r[1])) return undefined;
    if (r[0] <= after || r[1] < r[0] || r[1] >= origin) return undefined;
    after = r[1] + 1; // adjacent ranges are one range
  }
  return parsed as Gaps;
};

/** The stored text of a gap list (what the origin's MAC binds). */
export const gapsText = (gaps: Gaps): string => JSON.stringify(gaps.map(([a, b]) => [a, b]));

const inGap = (gaps: Gaps, p: number): boolean => {
  let lo = 0;
  let hi = gaps.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const [a, b] = gaps[mid]!;
    if (p < a) hi = mid - 1;
    else if (p > b) lo = mid + 1;
    else return true;
  }
  return false;
};

/** The seal of the events one transaction appended to one stream, in position order. */
export const sealEvents = (keys: EvidenceKeyring, streamId: string, events: readonly ChainedCells[]): EventMacRow => {
  const from = Number(events[0]!.stream_position);
  const to = Number(events[events.length - 1]!.stream_position);
  return { stream_id: streamId, from_position: from, to_position: to, ...keys.macOf(rangeInput(streamId, from, to, events)) };
};

/** The five events a start appends, as stored. */
export const startEventCells = (plan: StartWrite): ChainedCells[] =>
  [...plan.events.evidence, ...plan.events.runEvent, ...plan.events.barrier].map((e) => ({
    stream_id: plan.streamId,
    stream_position: e.position,
    event_id: e.eventId,
    event_type: e.type,
    data_json: e.dataJson,
    committed_at_ms: plan.committedAtMs,
  }));

/** Lifecycle events as they were appended (their JSON is stored canonical). */
export const appendedEventCells = (streamId: string, events: readonly StoredEvent[]): ChainedCells[] =>
  events.map((e) => ({
    stream_id: streamId,
    stream_position: e.streamPosition,
    event_id: e.eventId,
    event_type: e.event.type,
    data_json: canonicalJson(e.event.data),
    committed_at_ms: e.committedAtMs,
  }));

type Origin =
  | { readonly kind: 'none' }
  | { readonly kind: 'strict' }
  | { readonly kind: 'from'; readonly globalPosition: number; readonly ms: number; readonly gapsText: string; readonly gaps: Gaps };

const macProblem = (what: string, keyId: string, result: Exclude<MacCheck, 'valid'>): string =>
  result === 'unknown_key'
    ? `${what} is sealed under key id ${printableKeyId(keyId)}, which this keyring does not hold (R9.4)`
    : `${what} has a seal that does not verify under key ${printableKeyId(keyId)} (R9.4)`;

/**
 * The earliest origin a held key verifies. Origin rows exist but none verifies: no event is
 * legacy (the strict reading). No origin row at all: no keyed writer has written yet.
 */
const originOf = (keys: EvidenceKeyring, rows: readonly SealOriginRow[], findings: SealFinding[]): Origin => {
  if (rows.length === 0) return { kind: 'none' };
  let best: Origin = { kind: 'strict' };
  for (const row of rows) {
    const g = Number(row.from_global_position);
    const ms = Number(row.from_ms);
    const text = typeof row.legacy_gaps === 'string' ? row.legacy_gaps : '';
    const result = keys.check(row, originInput(g, ms, text));
    if (result === 'mismatch') findings.push({ record: `seal origin ${printableKeyId(row.key_id)}`, problem: macProblem('the seal origin', row.key_id, result) });
    if (result !== 'valid') continue;
    const gaps = gapsOf(text, g);
    // a MAC that verifies over a list that is not one was made by a holder of the key: damage all the same
    if (gaps === undefined) findings.push({ record: `seal origin ${printableKeyId(row.key_id)}`, problem: 'the seal origin\'s list of free positions is not ascending ranges below it (R14.1)' });
    else if (best.kind !== 'from' || g < best.globalPosition) best = { kind: 'from', globalPosition: g, ms, gapsText: text, gaps };
  }
  return best;
};

/**
 * The origin row the active key still lacks, or undefined: the verified origin re-sealed
 * under the active key after a rotation, or a fresh one starting at `fresh`.
 */
export const originToWrite = (keys: EvidenceKeyring, rows: readonly SealOriginRow[], fresh: FreshOrigin): SealOriginRow | undefined => {
  if (rows.some((r) => r.key_id === keys.activeKeyId)) return undefined;
  const origin = originOf(keys, rows, []);
  const from = origin.kind === 'from' ? origin : { ...fresh, gapsText: gapsText(fresh.gaps) };
  if (origin.kind !== 'from' && gapsOf(from.gapsText, from.globalPosition) === undefined) throw new RangeError('the free positions below a seal origin must be ascending ranges below it');
  return { from_global_position: from.globalPosition, from_ms: from.ms, legacy_gaps: from.gapsText, ...keys.macOf(originInput(from.globalPosition, from.ms, from.gapsText)) };
};

/** In the frozen set: below the origin and its clock, at a position that held an event when the origin was written. */
const isLegacy = (origin: Extract<Origin, { kind: 'from' }>, e: SealedEventRow): boolean => {
  const g = Number(e.global_position);
  return g >= 1 && g < origin.globalPosition && Number(e.committed_at_ms) <= origin.ms && !inGap(origin.gaps, g);
};

const at = (streamId: string, from: number, to: number) => (from === to ? `${streamId}@${from}` : `${streamId}@${from}..${to}`);

/** Every seal problem of positions from..to of one stream, and how many events are sealed or legacy. */
export const checkSealedSpan = (keys: EvidenceKeyring, streamId: string, span: SealedSpan, from: number, to: number): { findings: SealFinding[]; sealed: number; legacy: number } => {
  const findings: SealFinding[] = [];
  let origin = originOf(keys, span.origins, findings);
  // R9.3: without its origin every unsealed event would read as legacy, an event appended
  // without the key included. Seals or evidence MACs in the store say sealing began.
  if (origin.kind === 'none' && span.evidenceWithoutOrigin) {
    findings.push({ record: at(streamId, from, to), problem: 'keyed evidence is stored but the seal origin is missing, so no event reads as legacy (R9.4)' });
    origin = { kind: 'strict' };
  }
  const byPosition = new Map(span.events.map((e) => [Number(e.stream_position), e]));
  const covered = new Set<number>();
  for (const row of span.macs) {
    const a = Number(row.from_position);
    const b = Number(row.to_position);
    const events: SealedEventRow[] = [];
    for (let p = a; p <= b && Number.isSafeInteger(a) && Number.isSafeInteger(b); p++) {
      const e = byPosition.get(p);
      if (e === undefined) break;
      events.push(e);
    }
    if (events.length !== b - a + 1) {
      findings.push({ record: at(streamId, a, b), problem: 'a seal names positions that hold no event (R9.4)' });
      continue;
    }
    const result = keys.check(row, rangeInput(streamId, a, b, events));
    if (result !== 'valid') findings.push({ record: at(streamId, a, b), problem: macProblem(`events ${a}..${b}`, row.key_id, result) });
    else for (let p = a; p <= b; p++) covered.add(p);
  }
  let sealed = 0;
  let legacy = 0;
  let sawSealed = false;
  let open: number | undefined;
  let last = from - 1;
  const close = (end: number) => {
    if (open === undefined) return;
    findings.push({ record: at(streamId, open, end), problem: 'appended without a valid seal of the deployment key, after sealing began (R9.4)' });
    open = undefined;
  };
  for (let p = from; p <= to; p++) {
    const e = byPosition.get(p);
    if (e === undefined) break; // a missing event is the stream check's finding, not this one's
    last = p;
    if (covered.has(p)) {
      close(p - 1);
      sealed++;
      sawSealed = true;
    } else if (!sawSealed && (origin.kind === 'none' || (origin.kind === 'from' && isLegacy(origin, e)))) {
      legacy++;
    } else {
      open ??= p;
    }
  }
  close(last);
  // Origin rows that no held key verifies beside seals that do: the active key's origin is written
  // with its first seal, so it was changed (a retired key's origin alone is not this).
  if (origin.kind === 'strict' && covered.size > 0) findings.push({ record: at(streamId, from, to), problem: 'events sealed under a held key, but no seal origin verifies under one (R9.4)' });
  return { findings, sealed, legacy };
};

/** The fail-closed form for read paths: the first seal problem as CORRUPT_RECORD. */
export const requireSealedSpan = (keys: EvidenceKeyring, streamId: string, span: SealedSpan, from: number, to: number): void => {
  const first = checkSealedSpan(keys, streamId, span, from, to).findings[0];
  if (first !== undefined) throw new CorruptRecordError('run event', first.record, first.problem);
};

/**
 * A keyed write appends to a stream only after a head that reads as a verified read reads it:
 * sealed, or legacy. Otherwise an event a writer without the key appended would become history
 * the runtime builds on (a start decided on a StepRun made ready without the key). Every keyed
 * append checks it, so under one key an unsealed event can only ever be a stream's head.
 */
export const requireSealedHead = (keys: EvidenceKeyring, streamId: string, span: SealedSpan, head: number): void => {
  if (head < 1) return;
  const first = checkSealedSpan(keys, streamId, span, head, head).findings[0];
  if (first !== undefined) throw new CorruptRecordError('run event', first.record, `${first.problem}; a keyed write does not append after it`);
};

/** The stream position a keyed append follows: the one before the first event it seals. */
export const headBefore = (events: readonly ChainedCells[]): number => Number(events[0]!.stream_position) - 1;

