import * as t from 'io-ts';
import type { EvidenceKeyring } from '../../application/evidenceKeys';
import { headBefore, originToWrite, requireSealedHead, sealEvents, type EventMacRow, type SealedSpan } from '../../application/eventSeals';
import type { ChainedCells } from '../../domain/eventChain';
import { named, prefixed, type Params } from './named';
import { run, type Queryable } from './query';
import { EventRowCodec, PgInt, decodeRow } from './rowCodecs';
import { INSERT_EVENTS_SQL } from './sql';
import { sealedSpanColumns, sealedSpanCtes } from './sealedSpanSql';
import type { Tx } from './transactions';

// Keyed evidence over the Run stream on PostgreSQL (R9.4, application/eventSeals.ts). A seal
// rides in a statement the transaction sends anyway (the barrier's MAC for a start, the event
// insert for a lifecycle append), so a keyed write costs no extra round trip once the seal
// origin is stored; the origin is written by the first keyed transaction.

const INSERT_SEAL_CTE = `seal AS (INSERT INTO ql3.run_event_macs (stream_id, from_position, to_position, key_id, mac)
    VALUES (:seal_stream_id, :seal_from_position, :seal_to_position, :seal_key_id, :seal_mac) RETURNING 1)`;
/** A start's seals: the barrier's MAC and the seal of its five events, one statement. */
export const INSERT_START_SEALS = named(`WITH ${INSERT_SEAL_CTE}
  INSERT INTO ql3.start_evidence_macs (start_id, key_id, mac) VALUES (:start_id, :key_id, :mac)`);
/** A keyed lifecycle append: the events and their seal, one statement. */
export const INSERT_SEALED_EVENTS = named(`WITH ${INSERT_SEAL_CTE}\n${INSERT_EVENTS_SQL}`);

const SELECT_SEAL_ORIGINS = named('SELECT key_id, from_global_position, from_ms, legacy_gaps, mac FROM ql3.run_event_seal_origins ORDER BY key_id');
/**
 * A fresh origin (R14.1): the next position, the clock, and the ranges of positions below it that
 * hold no committed event, all in one statement's snapshot. An event a transaction still open
 * then commits below the origin lands in one of those ranges, so it never reads as legacy.
 */
const FRESH_ORIGIN = named(`WITH next AS (SELECT coalesce(max(global_position), 0) + 1 AS p FROM ql3.events),
  taken AS (SELECT global_position AS p FROM ql3.events UNION ALL SELECT p FROM next),
  step AS (SELECT p, lag(p, 1, 0::bigint) OVER (ORDER BY p) AS prev FROM taken)
SELECT (SELECT p FROM next) AS next, (extract(epoch FROM transaction_timestamp()) * 1000)::bigint AS now_ms,
  (SELECT coalesce(json_agg(json_build_array(prev + 1, p - 1) ORDER BY p), '[]'::json) FROM step WHERE p > prev + 1) AS gaps`);
const INSERT_SEAL_ORIGIN = named(`INSERT INTO ql3.run_event_seal_origins (key_id, from_global_position, from_ms, legacy_gaps, mac)
  VALUES (:key_id, :from_global_position, :from_ms, :legacy_gaps, :mac) ON CONFLICT DO NOTHING`);

/** The origins, the seals overlapping from..to of one stream, and the events they span, in one statement. */
const READ_SEALED_SPAN = named(`WITH ${sealedSpanCtes(':from::bigint', ':to::bigint')}
SELECT ${sealedSpanColumns()}`);

const OriginRowCodec = t.type({ key_id: t.string, from_global_position: PgInt, from_ms: PgInt, legacy_gaps: t.string, mac: t.string });
const GapsCodec = t.array(t.tuple([PgInt, PgInt]));
const MacRowCodec = t.type({ stream_id: t.string, from_position: PgInt, to_position: PgInt, key_id: t.string, mac: t.string });
const SpanCodec = t.type({ macs: t.array(MacRowCodec), events: t.array(EventRowCodec), origins: t.array(OriginRowCodec), evidence_without_origin: t.boolean });

const spanOf = (row: unknown, streamId: string): SealedSpan => {
  const { evidence_without_origin: evidenceWithoutOrigin, ...span } = decodeRow(SpanCodec, row, 'event seal', streamId);
  return { ...span, evidenceWithoutOrigin };
};

/** The head's seal span as READ_START carries it for a keyed new start (its `seal_` columns, sql.ts). */
export const headSpanOfRead = (row: Record<string, unknown>, streamId: string): SealedSpan =>
  spanOf({ macs: row['seal_macs'], events: row['seal_events'], origins: row['seal_origins'], evidence_without_origin: row['seal_evidence_without_origin'] }, streamId);

export const readSealedSpan = async (q: Queryable, streamId: string, from: number, to: number): Promise<SealedSpan> => {
  const [row] = await run(q, READ_SEALED_SPAN, { stream_id: streamId, from, to });
  return spanOf(row, streamId);
};

/** The seal parameters of a statement that carries INSERT_SEAL_CTE. */
export const sealParams = (row: EventMacRow): Params => prefixed('seal_', row);

/**
 * The seals one keyed authority writes: `seal` stores the origin first when no transaction
 * has yet seen it stored, then returns the seal row for the caller's statement. A start sent
 * in two round trips cannot read inside its write, so it calls `ensureOrigin` before its first
 * keyed write: one more statement, once per authority (R9.4: a store without an origin would
 * read every unsealed event as legacy).
 */
export const postgresSealer = (keys: EvidenceKeyring) => {
  let originStored = false;
  const ensureOrigin = async (q: Queryable): Promise<void> => {
    if (originStored) return;
    const rows = (await run(q, SELECT_SEAL_ORIGINS, {})).map((r) => decodeRow(OriginRowCodec, r, 'event seal origin', 'origins'));
    if (!rows.some((r) => r.key_id === keys.activeKeyId)) {
      const [next] = await run(q, FRESH_ORIGIN, {});
      const fresh = {
        globalPosition: decodeRow(PgInt, next?.next, 'event', 'next global position'),
        ms: decodeRow(PgInt, next?.now_ms, 'clock', 'transaction_timestamp()'),
        gaps: decodeRow(GapsCodec, next?.gaps, 'event', 'free positions below the seal origin'),
      };
      const origin = originToWrite(keys, rows, fresh);
      if (origin !== undefined) await run(q, INSERT_SEAL_ORIGIN, { ...origin });
    }
    originStored = true;
  };
  /** The head a keyed append follows must be sealed or legacy (application/eventSeals.ts). */
  const requireHead = async (q: Queryable, streamId: string, head: number): Promise<void> => {
    if (head >= 1) requireSealedHead(keys, streamId, await readSealedSpan(q, streamId, head, head), head);
  };
  const seal = async (tx: Tx, streamId: string, events: readonly ChainedCells[]): Promise<EventMacRow> => {
    await requireHead(tx.client, streamId, headBefore(events));
    await ensureOrigin(tx.client);
    return sealEvents(keys, streamId, events);
  };
  return Object.assign(seal, { ensureOrigin });
};

export type PostgresSealer = ReturnType<typeof postgresSealer>;
