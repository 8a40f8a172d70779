import * as P from '../../infrastructure/sqlite/sql';
import type { SeededRun } from '../lib/startRows';
import * as S from './sql';

// The wire format between the seed generator (a worker thread) and the thread that inserts.
// Posting the row objects cost more than deriving them (structured clone of ~170 values per
// Run), so a batch travels as ONE string: each row is its kind's index followed by its values
// in the INSERT's parameter order, every item preceded by U+0001. Canonical JSON and the ids
// never contain a raw control character; the encoder checks anyway, and the decoder checks
// every row's kind and every integer, so a misaligned batch fails instead of writing garbage.
//
// The text is built with `+`, not Array.prototype.join: V8's join returns a two-byte string
// (twice the bytes to copy, slower to bind) as soon as one element is an internalised string,
// which the domain's ids are, while a concatenation of one-byte strings stays one-byte.

export const FIELD_SEPARATOR = '\u0001';

export interface SeedRowKind {
  readonly table: string;
  /** The same INSERT as the named one (product's or bench's), with positional parameters. */
  readonly sql: string;
  /** Parameter (= column) names, in order. */
  readonly names: readonly string[];
}

const positional = (named: string): SeedRowKind => {
  const names: string[] = [];
  const sql = named.replace(/@(\w+)/g, (_, n: string) => {
    names.push(n);
    return '?';
  });
  const table = /^\s*INSERT INTO (\w+)/.exec(sql)?.[1];
  if (table === undefined || names.length === 0) throw new Error(`not a named INSERT: ${named}`);
  return { table, sql, names };
};

export const STREAM = 0;
const RUN = 1;
const STEP_RUN = 2;
const EVENT = 3;
const AUDIT = 4;
const TRACE = 5;
const RECEIPT = 6;
const MUTATION = 7;
const BARRIER = 8;

/** Indexed by the kind codes above. */
export const SEED_ROW_KINDS: readonly SeedRowKind[] = [
  positional(S.INSERT_STREAM),
  positional(P.INSERT_RUN),
  positional(S.INSERT_STEP_RUN),
  positional(S.INSERT_EVENT),
  positional(P.INSERT_AUDIT),
  positional(P.INSERT_TRACE),
  positional(P.INSERT_RECEIPT),
  positional(P.INSERT_MUTATION),
  positional(P.INSERT_BARRIER),
];
if (SEED_ROW_KINDS.length > 10) throw new Error('kind codes are single digits');

const rowOf = (kind: number, row: object): string => {
  const k = SEED_ROW_KINDS[kind]!;
  const r = row as Record<string, unknown>;
  let out = FIELD_SEPARATOR + kind;
  for (const name of k.names) {
    const v = r[name];
    if (typeof v === 'string') {
      if (v.includes(FIELD_SEPARATOR)) throw new Error(`${k.table}.${name} contains the field separator`);
    } else if (!Number.isSafeInteger(v)) {
      throw new Error(`${k.table}.${name} is neither text nor a safe integer: ${String(v)}`);
    }
    out += FIELD_SEPARATOR + (v as string | number);
  }
  return out;
};

/** One started Run's rows, parents before children (the order the product writes them). */
export const encodeSeededRun = (r: SeededRun): string => {
  let out = rowOf(STREAM, r.stream) + rowOf(RUN, r.run) + rowOf(STEP_RUN, r.stepRun);
  for (const e of r.events) out += rowOf(EVENT, e);
  const rows = r.start.rows;
  out += rowOf(AUDIT, rows.audit) + rowOf(TRACE, rows.trace) + rowOf(RECEIPT, rows.receipt) + rowOf(MUTATION, rows.mutation) + rowOf(BARRIER, rows.barrier);
  return out;
};
