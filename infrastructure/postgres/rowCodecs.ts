import * as t from 'io-ts';
import { isLeft } from 'fp-ts/lib/Either';
import { CorruptRecordError, REPLAY_IDENTITIES } from '../../domain';
import { oneOf, toIssues } from '../../domain/codecs';

// io-ts at the database boundary: every row read back is decoded before anything trusts it.
// pg hands BIGINT back as a decimal string (we never touch its global type parsers) and json
// aggregates hand it back as a number; both become a JS number here, or the row is corrupt.

const DECIMAL = /^-?(?:0|[1-9][0-9]*)$/;

export const PgInt = new t.Type<number, number, unknown>(
  'PgInt',
  (u): u is number => typeof u === 'number' && Number.isSafeInteger(u),
  (u, c) => {
    if (typeof u === 'number' && Number.isSafeInteger(u)) return t.success(u);
    if (typeof u === 'string' && DECIMAL.test(u)) {
      const n = Number(u);
      if (Number.isSafeInteger(n)) return t.success(n);
    }
    return t.failure(u, c, 'expected a BIGINT within the safe integer range');
  },
  t.identity,
);

export const RunRowCodec = t.type({ run_id: t.string, project_id: t.string, snapshot_id: t.string, snapshot_digest: t.string, version: PgInt });

export const StepRunRowCodec = t.type({
  run_id: t.string,
  step_run_id: t.string,
  project_id: t.string,
  kind: t.string,
  status: t.string,
  version: PgInt,
  digest: t.string,
  state_json: t.string,
});

export const EventRowCodec = t.type({
  global_position: PgInt,
  stream_id: t.string,
  stream_position: PgInt,
  event_id: t.string,
  event_type: t.string,
  data_json: t.string,
  committed_at_ms: PgInt,
});

/** An event row of a stream read (R9.2): with the chain digest that binds it to the one before it. */
export const ChainedEventRowCodec = t.intersection([EventRowCodec, t.type({ chain_digest: t.string })]);

export const AuditEventRowCodec = t.type({
  audit_event_id: t.string,
  start_id: t.string,
  run_id: t.string,
  step_run_id: t.string,
  audit_event_digest: t.string,
  committed_at_ms: PgInt,
});

export const TraceAnchorRowCodec = t.type({
  trace_id: t.string,
  span_id: t.string,
  start_id: t.string,
  run_id: t.string,
  step_run_id: t.string,
  trace_digest: t.string,
  committed_at_ms: PgInt,
});

export const AuditReceiptRowCodec = t.type({
  audit_receipt_id: t.string,
  audit_event_id: t.string,
  trace_id: t.string,
  start_id: t.string,
  receipt_digest: t.string,
  committed_at_ms: PgInt,
});

export const MutationRowCodec = t.type({
  mutation_id: t.string,
  run_event_id: t.string,
  start_id: t.string,
  run_id: t.string,
  step_run_id: t.string,
  from_status: t.string,
  to_status: t.string,
  from_version: PgInt,
  to_version: PgInt,
  run_event_sequence: PgInt,
  mutation_digest: t.string,
  started_step_run_digest: t.string,
  requested_at_ms: PgInt,
  committed_at_ms: PgInt,
});

export const BarrierRowCodec = t.type({
  start_id: t.string,
  command_digest: t.string,
  barrier_digest: t.string,
  project_id: t.string,
  run_id: t.string,
  step_run_id: t.string,
  started_step_run_version: PgInt,
  started_step_run_digest: t.string,
  mutation_id: t.string,
  mutation_digest: t.string,
  run_event_id: t.string,
  trace_id: t.string,
  trace_digest: t.string,
  audit_event_id: t.string,
  audit_receipt_id: t.string,
  audit_receipt_digest: t.string,
  adapter_id: t.string,
  committed_at_ms: PgInt,
});

export const ReplayIdentityRowCodec = t.type({
  identity: oneOf(REPLAY_IDENTITIES),
  value: t.string,
  start_id: t.string,
  command_digest: t.string,
});

/** A hit of READ_START (sql.ts): identity, value, start_id, command_digest. */
export const HitTupleCodec = t.tuple([ReplayIdentityRowCodec.props.identity, t.string, t.string, t.string]);

/** Decode one row or fail closed, naming what and where. */
export const decodeRow = <A>(codec: t.Decoder<unknown, A>, raw: unknown, kind: string, id: string): A => {
  // A row already of the decoded form (json aggregates carry BIGINTs as numbers) is accepted by
  // `is`, the same verdict as `decode` without an error context built per cell, and `decode`
  // would hand back that very value; a row that needs converting or is corrupt is decoded.
  if ((codec as Partial<Pick<t.Type<A>, 'is'>>).is?.(raw) === true) return raw as A;
  const r = codec.decode(raw);
  if (isLeft(r)) {
    const first = toIssues(r.left)[0];
    throw new CorruptRecordError(kind, id, `row does not decode${first ? ` (${first.path}: ${first.message})` : ''}`);
  }
  return r.right;
};

/** A json_agg column: NULL (no rows) or an array of rows, each decoded. */
export const decodeRows = <A>(codec: t.Decoder<unknown, A>, raw: unknown, kind: string, id: string): A[] => {
  if (raw === null || raw === undefined) return [];
  if (!Array.isArray(raw)) throw new CorruptRecordError(kind, id, 'expected a list of rows');
  return raw.map((r) => decodeRow(codec, r, kind, id));
};

/** A row sent as a json array of `columns` (sql.ts), named again; any other shape is corrupt. */
export const namedRow = (raw: unknown, columns: readonly string[], kind: string, id: string): Record<string, unknown> => {
  if (!Array.isArray(raw) || raw.length !== columns.length) throw new CorruptRecordError(kind, id, `row does not decode (expected ${columns.length} columns)`);
  const row: Record<string, unknown> = {};
  for (let i = 0; i < columns.length; i++) row[columns[i]!] = raw[i];
  return row;
};

/** A json_agg column of rows sent as arrays of `columns`: NULL (no rows) or a list, each row named and decoded. */
export const decodeArrayRows = <A>(codec: t.Decoder<unknown, A>, columns: readonly string[], raw: unknown, kind: string, id: string): A[] => {
  if (raw === null || raw === undefined) return [];
  if (!Array.isArray(raw)) throw new CorruptRecordError(kind, id, 'expected a list of rows');
  return raw.map((r) => decodeRow(codec, namedRow(r, columns, kind, id), kind, id));
};

/** At most one row, or fail closed: an identity that matches several rows is never guessed. */
export const atMostOne = <A>(rows: readonly A[], kind: string, id: string): A | undefined => {
  if (rows.length > 1) throw new CorruptRecordError(kind, id, `${rows.length} rows share one key`);
  return rows[0];
};

/** Keyed evidence (R9.4): one MAC row; the keyring checks its form and value. */
export const EvidenceMacRowCodec = t.type({ key_id: t.string, mac: t.string });
