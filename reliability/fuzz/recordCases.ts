import fc from 'fast-check';
import canonicalize from 'canonicalize';
import type { StoredStartRows } from '../../application/checks/verifyRows';
import { FORBIDDEN_TEXT } from './corpus';

// Rows read back, fuzzed the way commands are: one change per case to one cell of a stored
// start (a JSON column changed in its content or only in its bytes, a scalar changed, nulled or
// given the wrong type, a row dropped, duplicated or swapped). The decoders must answer with
// CorruptRecordError whenever the rows differ from what was stored, and never throw anything
// else.

type Row = Record<string, unknown>;

export interface RecordCase {
  readonly kind: string;
  /** Which stored start (by index) and the changed rows. */
  readonly start: number;
  readonly rows: StoredStartRows;
  /** Where the change was made, for reports. */
  readonly where: string;
}

const FACT_TABLES = ['barrier', 'audit', 'trace', 'receipt', 'mutation'] as const;
type FactTable = (typeof FACT_TABLES)[number];

const clone = <T>(v: T): T => structuredClone(v);

/** Text-level changes of a JSON column: same value or not, the bytes differ. */
const textChanges = (text: string): fc.Arbitrary<{ kind: string; text: string }> => {
  const positions = [...text.matchAll(/[,:{[]/g)].map((m) => m.index! + 1);
  const keyStarts = [...text.matchAll(/"([A-Za-z]+)":/g)].map((m) => ({ at: m.index!, key: m[1]! }));
  const chars = [...text.matchAll(/[A-Za-z0-9]/g)].map((m) => m.index!);
  return fc.oneof(
    fc.constantFrom(...positions).map((at) => ({ kind: 'json bytes: whitespace', text: `${text.slice(0, at)} ${text.slice(at)}` })),
    fc.constantFrom(...chars).map((at) => ({ kind: 'json bytes: unicode escape', text: `${text.slice(0, at)}\\u${text.charCodeAt(at).toString(16).padStart(4, '0')}${text.slice(at + 1)}` })),
    fc.constantFrom(...chars).chain((at) =>
      fc.constantFrom('0', '1', 'a', 'f', 'Z', '.', '-', '\u00e9').filter((c) => c !== text[at]).map((c) => ({ kind: 'json bytes: one character', text: `${text.slice(0, at)}${c}${text.slice(at + 1)}` })),
    ),
    fc.integer({ min: 1, max: Math.max(1, text.length - 1) }).map((cut) => ({ kind: 'json bytes: truncated', text: text.slice(0, cut) })),
    fc.constant({ kind: 'json bytes: BOM', text: `\ufeff${text}` }),
    fc.constant({ kind: 'json bytes: trailing garbage', text: `${text}x` }),
    fc.constant({ kind: 'json bytes: pretty printed', text: JSON.stringify(JSON.parse(text), null, 1) }),
    ...(keyStarts.length > 0
      ? [fc.constantFrom(...keyStarts).map(({ at, key }) => ({ kind: 'json bytes: duplicate key', text: `${text.slice(0, at)}"${key}":"dup",${text.slice(at)}` }))]
      : []),
  );
};

const leafPaths = (v: unknown, prefix: string[] = []): string[][] =>
  v !== null && typeof v === 'object' ? Object.entries(v as Row).flatMap(([k, x]) => leafPaths(x, [...prefix, k])) : [prefix];
const objectPaths = (v: unknown, prefix: string[] = []): string[][] =>
  v !== null && typeof v === 'object' ? [prefix, ...Object.entries(v as Row).flatMap(([k, x]) => objectPaths(x, [...prefix, k]))] : [];

const setAt = (value: unknown, path: readonly string[], next: unknown, remove = false): unknown => {
  const copy = clone(value) as Row;
  let target = copy;
  for (const k of path.slice(0, -1)) target = target[k] as Row;
  const last = path[path.length - 1]!;
  if (remove) delete target[last];
  else Object.defineProperty(target, last, { value: next, enumerable: true, configurable: true, writable: true });
  return copy;
};

/** Content-level changes of a JSON column, written back canonically (so only content differs). */
const contentChanges = (text: string): fc.Arbitrary<{ kind: string; text: string }> => {
  const value = JSON.parse(text) as unknown;
  const leaves = leafPaths(value).filter((p) => p.length > 0);
  const objects = objectPaths(value);
  const write = (v: unknown) => canonicalize(v) ?? JSON.stringify(v) ?? 'null';
  return fc.oneof(
    fc.constantFrom(...leaves).chain((p) =>
      fc
        .oneof(
          fc.string({ maxLength: 20 }),
          fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,30}$/),
          fc.stringMatching(/^[0-9a-f]{64}$/).map((h) => `sha256:${h}`),
          fc.integer(),
          fc.constantFrom<unknown>(null, true, [], {}, 0, -1, 1e308, Number.MAX_SAFE_INTEGER + 1, 'running', 'ready', ...FORBIDDEN_TEXT),
        )
        .map((next) => ({ kind: 'json content: leaf changed', text: write(setAt(value, p, next)) })),
    ),
    fc.constantFrom(...leaves).map((p) => ({ kind: 'json content: field removed', text: write(setAt(value, p, undefined, true)) })),
    fc.constantFrom(...objects).chain((p) =>
      fc.tuple(fc.constantFrom('extra', 'input', 'url', 'handler', 'secret', '__proto__', 'zz'), fc.jsonValue({ maxDepth: 2 })).map(([k, v]) => ({
        kind: 'json content: unknown field',
        text: write(setAt(value, [...p, k], v)),
      })),
    ),
    fc.constantFrom(...leaves).chain((p) => fc.integer({ min: 17, max: 200 }).map((d) => {
      let deep: unknown = 'x';
      for (let i = 0; i < d; i++) deep = [deep];
      return { kind: 'json content: deep nesting', text: write(setAt(value, p, deep)) };
    })),
  );
};

const scalarChanges = (current: unknown): fc.Arbitrary<{ kind: string; value: unknown }> => {
  const numeric = typeof current === 'number' || (typeof current === 'string' && /^-?\d+$/.test(current));
  if (numeric) {
    const n = Number(current);
    return fc.oneof(
      fc.constantFrom(n + 1, n - 1, n + 1000, 0, -1, 2 ** 53).map((value) => ({ kind: 'cell: other integer', value })),
      fc.constantFrom(String(n + 1), String(n - 1000)).map((value) => ({ kind: 'cell: other integer as text', value })),
      fc.constantFrom<unknown>(null, undefined, 'x', true, {}).map((value) => ({ kind: 'cell: null or wrong type', value })),
    );
  }
  const s = String(current);
  return fc.oneof(
    fc.constantFrom(`${s.slice(0, -1)}${s.endsWith('0') ? '1' : '0'}`, `${s}x`, s.slice(1), '', s.toUpperCase()).filter((v) => v !== s).map((value) => ({ kind: 'cell: other text', value })),
    fc.constantFrom<unknown>(null, undefined, 42, true, []).map((value) => ({ kind: 'cell: null or wrong type', value })),
  );
};

const JSON_COLUMNS = new Set(['data_json']);

export const recordCases = (starts: readonly StoredStartRows[]): fc.Arbitrary<RecordCase> =>
  fc.integer({ min: 0, max: starts.length - 1 }).chain((start) => {
    const base = starts[start]!;
    const cells: { table: string; index: number; column: string; value: unknown }[] = [];
    for (const table of FACT_TABLES) for (const [column, value] of Object.entries(base[table] as unknown as Row)) cells.push({ table, index: -1, column, value });
    base.events.forEach((row, index) => {
      for (const [column, value] of Object.entries(row)) if (column !== 'global_position') cells.push({ table: 'events', index, column, value });
    });
    base.identities.forEach((row, index) => {
      for (const [column, value] of Object.entries(row)) cells.push({ table: 'identities', index, column, value });
    });
    const put = (cell: (typeof cells)[number], value: unknown): StoredStartRows => {
      const rows = clone(base) as unknown as Record<string, unknown>;
      const target = (cell.index < 0 ? rows[cell.table] : (rows[cell.table] as Row[])[cell.index]) as Row;
      if (value === undefined) delete target[cell.column];
      else target[cell.column] = value;
      return rows as unknown as StoredStartRows;
    };
    const cellCase = fc.constantFrom(...cells).chain((cell) => {
      const where = `${cell.table}${cell.index >= 0 ? `[${cell.index}]` : ''}.${cell.column}`;
      if (JSON_COLUMNS.has(cell.column)) {
        return fc.oneof(textChanges(String(cell.value)), contentChanges(String(cell.value))).map(({ kind, text }) => ({ kind, start, where, rows: put(cell, text) }));
      }
      return scalarChanges(cell.value).map(({ kind, value }) => ({ kind, start, where, rows: put(cell, value) }));
    });
    const rowCase = fc.oneof(
      fc.constantFrom<FactTable>('audit', 'trace', 'receipt', 'mutation').map((table) => {
        const rows = clone(base) as unknown as Record<string, unknown>;
        rows[table] = undefined;
        return { kind: 'row: fact row missing', start, where: table, rows: rows as unknown as StoredStartRows };
      }),
      fc.integer({ min: 0, max: base.events.length - 1 }).map((i) => ({ kind: 'row: event missing', start, where: `events[${i}]`, rows: { ...clone(base), events: base.events.filter((_, j) => j !== i) } })),
      fc.integer({ min: 0, max: base.events.length - 2 }).map((i) => {
        const events = clone(base.events) as StoredStartRows['events'][number][];
        [events[i], events[i + 1]] = [events[i + 1]!, events[i]!];
        return { kind: 'row: events swapped', start, where: `events[${i}]`, rows: { ...clone(base), events } };
      }),
      fc.integer({ min: 0, max: base.identities.length - 1 }).map((i) => ({ kind: 'row: identity duplicated', start, where: `identities[${i}]`, rows: { ...clone(base), identities: [...base.identities, clone(base.identities[i]!)] } })),
      fc.integer({ min: 0, max: base.identities.length - 1 }).map((i) => ({ kind: 'row: identity missing', start, where: `identities[${i}]`, rows: { ...clone(base), identities: base.identities.filter((_, j) => j !== i) } })),
      fc.integer({ min: 0, max: starts.length - 1 }).filter((o) => o !== start).map((other) => ({
        kind: 'row: fact of another start',
        start,
        where: 'audit',
        rows: { ...clone(base), audit: clone(starts[other]!.audit) },
      })),
    );
    return fc.oneof({ weight: 6, arbitrary: cellCase }, { weight: 1, arbitrary: rowCase });
  });

/** Did the change leave every row as it was (numbers compared by value, as pg hands BIGINT as text)? */
export const sameRows = (a: StoredStartRows, b: StoredStartRows): boolean => {
  const norm = (v: unknown): unknown => {
    if (typeof v === 'string' && /^-?(?:0|[1-9]\d*)$/.test(v)) return Number(v);
    if (Array.isArray(v)) return v.map(norm);
    if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).filter(([, x]) => x !== undefined).map(([k, x]) => [k, norm(x)]));
    return v;
  };
  return JSON.stringify(norm(a)) === JSON.stringify(norm(b));
};
