import fc from 'fast-check';
import { EXECUTION_CLASSES, MAX_COMMAND_BYTES, canonicalJson, parseJsonBytes, type ToolExecutionStartCommand } from '../../domain';
import { MAX_PARSE_DEPTH } from '../../domain/strictJson';
import { annotationsToReach, canonicalBytes, getPath, leafPaths } from '../../testkit/domainFixtures';
import { FORBIDDEN_IN_TEXT, FORBIDDEN_TEXT, NOT_JSON } from './corpus';

// The bad-input generator: each case is one input for `decodeStartCommand` / `prepare`, or
// bytes for `parseJsonBytes`, with what the harness expects. `invalid` cases name the path an
// issue must point at (or below); `either` cases (a plausible single-field change) may pass
// validation, and are then checked by properties instead of an expected verdict.

export type Verdict = 'valid' | 'invalid' | 'either';

export interface CommandCase {
  readonly kind: string;
  /** The value handed in (absent when `bytes` is). */
  readonly input?: unknown;
  /** Raw bytes, parsed with `parseJsonBytes` first. */
  readonly bytes?: Uint8Array;
  readonly expect: Verdict;
  /** Invalid: some issue's path is this one or below it. */
  readonly path?: string;
  /** The input is exactly one of the stored commands (any key order): replay -> existing. */
  readonly exact?: boolean;
}

type Json = Record<string, unknown>;

/** Every own name of Object.prototype (constructor, toString, __proto__, hasOwnProperty, ...). */
export const PROTOTYPE_NAMES: readonly string[] = Object.getOwnPropertyNames(Object.prototype);

/** The number a JSON literal names, or undefined when the strict parser refuses it (R10.1). */
const roundTrip = (literal: string): number | undefined => {
  try {
    return parseJsonBytes('number', literal) as number;
  } catch {
    return undefined;
  }
};
type Path = readonly string[];

export const pathText = (p: Path): string => (p.length === 0 ? '(root)' : p.join('.'));

/** Is `issue` at `expected` or below it? (`a.b` is below `a`; `a[0]` and `a.[0]` too.) */
export const isAtOrBelow = (issue: string, expected: string): boolean => {
  if (expected === '(root)') return true;
  const norm = (s: string) => s.replace(/\.\[/g, '[');
  const i = norm(issue);
  const e = norm(expected);
  return i === e || i.startsWith(`${e}.`) || i.startsWith(`${e}[`);
};

const clone = <T>(v: T): T => structuredClone(v);

/** Set (or define, so `__proto__` stays an own key) the value at `path` of a deep copy. */
const setAt = (base: unknown, path: Path, value: unknown): unknown => {
  if (path.length === 0) return value;
  const copy = clone(base) as Json;
  let target = copy;
  for (const k of path.slice(0, -1)) target = target[k] as Json;
  Object.defineProperty(target, path[path.length - 1]!, { value, enumerable: true, configurable: true, writable: true });
  return copy;
};

const deleteAt = (base: unknown, path: Path): unknown => {
  const copy = clone(base) as Json;
  let target = copy;
  for (const k of path.slice(0, -1)) target = target[k] as Json;
  delete target[path[path.length - 1]!];
  return copy;
};

/** Every object inside a command, by path ([] is the command itself). */
const objectPaths = (v: unknown, prefix: string[] = []): string[][] =>
  v !== null && typeof v === 'object' && !Array.isArray(v)
    ? [prefix, ...Object.entries(v as Json).flatMap(([k, x]) => objectPaths(x, [...prefix, k]))]
    : [];

const RANGES: Record<string, readonly [number, number]> = {
  requestedAtMs: [0, 8_640_000_000_000_000],
  timeoutMs: [1, 86_400_000],
  expectedVersion: [1, Number.MAX_SAFE_INTEGER],
  policyVersion: [1, Number.MAX_SAFE_INTEGER],
};
const numberVerdict = (key: string, n: number): Verdict => {
  const r = RANGES[key];
  return r !== undefined && Number.isSafeInteger(n) && n >= r[0] && n <= r[1] ? 'either' : 'invalid';
};

const IDENTITY = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const digestArb = fc.stringMatching(/^[0-9a-f]{64}$/).map((hex) => `sha256:${hex}`);
const identityArb = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,40}$/);
const anyString = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)), minLength: 1, maxLength: 3 }),
  fc.constantFrom('', ' ', '\u0000', 'a'.repeat(128), 'a'.repeat(129), 'Z'.repeat(10_000), '.hidden', '-dash', 'ünïcode', '🙂', 'a b', 'a\nb', 'x'.repeat(8193)),
);
const wrongTypeFor = (current: unknown): fc.Arbitrary<unknown> => {
  const pool: fc.Arbitrary<unknown>[] = [fc.constant(null), fc.boolean(), fc.constant([]), fc.constant({}), fc.array(fc.string(), { minLength: 1, maxLength: 3 }), fc.dictionary(fc.string(), fc.string(), { maxKeys: 3 })];
  if (typeof current === 'string') pool.push(fc.integer(), fc.double());
  if (typeof current === 'number') pool.push(fc.string(), fc.constant(String(current)));
  return fc.oneof(...pool);
};
const hugeNumbers = fc.constantFrom(
  -1, 0, 1, 1.5, -0, 1e308, -1e308, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER + 1, 2 ** 64, Number.MIN_VALUE, 86_400_000, 86_400_001,
  8_640_000_000_000_000, 8_640_000_000_000_001, 2_147_483_648, -(2 ** 53),
);
const deepValue = (depth: number, leaf: unknown): unknown => {
  let v: unknown = leaf;
  for (let i = 0; i < depth; i++) v = i % 2 === 0 ? [v] : { nest: v };
  return v;
};
const FORBIDDEN_KEYS = ['input', 'args', 'secret', 'password', 'token', 'apiKey', 'handler', 'callback', 'execute', 'module', 'modulePath', 'url', 'endpoint', 'output', 'result', 'error', 'stack', 'exception', 'payload'];
const ODD_KEYS = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', '', ' ', 'startid', 'startId ', 'zz'];

/** Every way a command arrives, from valid to hostile, as one arbitrary over cases. */
export const commandCases = (bases: readonly ToolExecutionStartCommand[]): fc.Arbitrary<CommandCase> => {
  const base = fc.constantFrom(...bases);
  const withLeaf = base.chain((b) => fc.constantFrom(...leafPaths(b)).map((path) => ({ b, path: path as Path })));
  const withObject = base.chain((b) => fc.constantFrom(...objectPaths(b).filter((p) => p[0] !== 'annotations')).map((path) => ({ b, path: path as Path })));
  const knownKeys = (b: unknown, p: Path) => new Set(Object.keys((p.length === 0 ? b : getPath(b, p as string[])) as Json));

  const valid: fc.Arbitrary<CommandCase> = fc.oneof(
    base.map((b) => ({ kind: 'valid: exact', input: clone(b), expect: 'valid' as const, exact: true })),
    base.chain((b) => fc.integer().map((seed) => ({ kind: 'valid: keys reordered', input: reorder(b, seed), expect: 'valid' as const, exact: true }))),
    base.map((b) => ({ kind: 'valid: null prototype', input: nullProto(b), expect: 'valid' as const, exact: true })),
    base.chain((b) =>
      fc
        .dictionary(fc.stringMatching(/^note\.[a-z0-9_]{1,20}$/), fc.stringMatching(/^[A-Za-z0-9 ,.!?'()-]{0,200}$/), { minKeys: 1, maxKeys: 8 })
        // R10.2: the command binds exactly ADR-0158's groups; free-text annotations are refused
        .map((annotations) => ({ kind: 'annotations (refused, R10.2)', input: { ...clone(b), annotations }, expect: 'invalid' as const, path: 'annotations' })),
    ),
  );

  const sameType: fc.Arbitrary<CommandCase> = withLeaf.chain(({ b, path }) => {
    const key = path[path.length - 1]!;
    const current = getPath(b, path as string[]);
    const value: fc.Arbitrary<unknown> =
      key === 'digest' || key.endsWith('Digest') ? digestArb
      : key in RANGES ? fc.integer({ min: RANGES[key]![0], max: Math.min(RANGES[key]![1], 2 ** 31) })
      : key === 'executionClass' ? fc.constantFrom(...EXECUTION_CLASSES)
      : key === 'fromStatus' ? fc.constantFrom('ready', 'waiting_approval')
      : identityArb;
    return value.filter((v) => v !== current).map((v) => ({ kind: 'mutation: same type', input: setAt(b, path, v), expect: 'either' as const }));
  });

  // Ids are data, never property names: an id spelled like a member of Object.prototype must get
  // exactly the answer any other unknown id gets (typed, nothing written), on every backend.
  const prototypeIds: fc.Arbitrary<CommandCase> = withLeaf
    .filter(({ path }) => /(?:^id|Id)$/.test(path[path.length - 1]!))
    .chain(({ b, path }) =>
      fc.constantFrom(...PROTOTYPE_NAMES).map((name) => ({
        kind: 'prototype-named id',
        input: setAt(b, path, name),
        expect: /^[A-Za-z0-9]/.test(name) ? ('either' as const) : ('invalid' as const),
        path: pathText(path),
      })),
    );

  const wrongType: fc.Arbitrary<CommandCase> = withLeaf.chain(({ b, path }) =>
    wrongTypeFor(getPath(b, path as string[])).map((v) => ({ kind: 'mutation: wrong type', input: setAt(b, path, v), expect: 'invalid' as const, path: pathText(path) })),
  );

  const strings: fc.Arbitrary<CommandCase> = withLeaf
    .filter(({ b, path }) => typeof getPath(b, path as string[]) === 'string')
    .chain(({ b, path }) =>
      anyString.map((v) => {
        const key = path[path.length - 1]!;
        const identityLike = !(key === 'digest' || key.endsWith('Digest') || ['schema', 'kind', 'executionClass', 'fromStatus', 'toStatus'].includes(key));
        const verdict: Verdict = identityLike && IDENTITY.test(v) ? 'either' : v === getPath(b, path as string[]) ? 'valid' : 'invalid';
        return { kind: 'mutation: string edge', input: setAt(b, path, v), expect: verdict, ...(verdict === 'invalid' ? { path: pathText(path) } : {}) };
      }),
    );

  const numbers: fc.Arbitrary<CommandCase> = withLeaf
    .filter(({ b, path }) => typeof getPath(b, path as string[]) === 'number')
    .chain(({ b, path }) =>
      hugeNumbers.map((n) => {
        const verdict = numberVerdict(path[path.length - 1]!, n);
        return { kind: 'mutation: number edge', input: setAt(b, path, n), expect: verdict, ...(verdict === 'invalid' ? { path: pathText(path) } : {}) };
      }),
    );

  const missing: fc.Arbitrary<CommandCase> = fc.oneof(withLeaf, withObject.filter(({ path }) => path.length > 0)).map(({ b, path }) => ({
    kind: 'mutation: missing field',
    input: deleteAt(b, path),
    expect: 'invalid' as const,
    path: path[0] === 'approval' ? 'approval' : pathText(path),
  }));

  const unknownField: fc.Arbitrary<CommandCase> = withObject.chain(({ b, path }) =>
    fc
      .tuple(fc.oneof(fc.constantFrom(...FORBIDDEN_KEYS, ...ODD_KEYS), fc.string({ minLength: 1, maxLength: 12 })), fc.jsonValue({ maxDepth: 2 }))
      .filter(([key]) => !knownKeys(b, path).has(key))
      .map(([key, value]) => ({
        kind: FORBIDDEN_KEYS.includes(key) ? 'unknown field: forbidden name' : 'unknown field',
        input: setAt(b, [...path, key], value),
        expect: 'invalid' as const,
        path: key === '' ? pathText(path) : pathText([...path, key]),
      })),
  );

  const forbiddenText: fc.Arbitrary<CommandCase> = fc.oneof(
    withLeaf
      .filter(({ b, path }) => typeof getPath(b, path as string[]) === 'string')
      .chain(({ b, path }) => fc.constantFrom(...FORBIDDEN_TEXT).map((v) => ({ kind: 'forbidden content: text', input: setAt(b, path, v), expect: 'invalid' as const, path: pathText(path) }))),
    base.chain((b) =>
      fc.constantFrom(...FORBIDDEN_IN_TEXT).map((v) => ({ kind: 'forbidden content: annotation', input: { ...clone(b), annotations: { 'note.x': v } }, expect: 'invalid' as const, path: 'annotations' })),
    ),
  );

  const notJson: fc.Arbitrary<CommandCase> = fc.oneof(withLeaf, withObject).chain(({ b, path }) =>
    fc.constantFrom(...NOT_JSON).map((make) => ({ kind: 'forbidden content: not JSON', input: setAt(b, path, make()), expect: 'invalid' as const, path: pathText(path) })),
  );

  const deep: fc.Arbitrary<CommandCase> = fc.oneof(withLeaf, withObject).chain(({ b, path }) =>
    fc.integer({ min: 17, max: 400 }).map((depth) => ({ kind: 'deep nesting', input: setAt(b, path, deepValue(depth, 'x')), expect: 'invalid' as const, path: pathText(path) })),
  );

  const sizes: fc.Arbitrary<CommandCase> = base.chain((b) =>
    fc.oneof(
      // within the limit, the filler (annotations) is itself refused since R10.2; past it, size comes first (R1.1)
      fc.constant(MAX_COMMAND_BYTES).map((n) => ({ kind: 'size: exactly 64 KiB', input: sized(b, n), expect: 'invalid' as const, path: 'annotations' })),
      fc.constantFrom(MAX_COMMAND_BYTES - 1, MAX_COMMAND_BYTES - 1000, 40_000).map((n) => ({ kind: 'size: under 64 KiB', input: sized(b, n), expect: 'invalid' as const, path: 'annotations' })),
      fc.constant(MAX_COMMAND_BYTES + 1).map((n) => ({ kind: 'size: 64 KiB + 1', input: sized(b, n), expect: 'invalid' as const, path: '(root)' })),
      fc.constantFrom(MAX_COMMAND_BYTES + 2, 100_000, 262_144, 400_000).map((n) => ({ kind: 'size: oversized', input: sized(b, n), expect: 'invalid' as const, path: '(root)' })),
      fc.constant(0).map(() => ({ kind: 'size: 65 annotations', input: { ...clone(b), annotations: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`note.${i}`, 'x'])) }, expect: 'invalid' as const, path: 'annotations' })),
    ),
  );

  const topLevel: fc.Arbitrary<CommandCase> = fc.constantFrom<unknown>(null, [], 'command', 42, true, {}, [bases[0]]).map((input) => ({ kind: 'wrong type: whole command', input, expect: 'invalid' as const, path: '(root)' }));

  const bytes: fc.Arbitrary<CommandCase> = base.chain((b) => {
    const text = JSON.stringify(b);
    const utf8 = Buffer.from(text, 'utf8');
    const stringOffsets = [...text.matchAll(/"[A-Za-z0-9]/g)].map((m) => Buffer.byteLength(text.slice(0, m.index! + 1)));
    const BAD = [[0xff], [0xfe], [0x80], [0xc0, 0xaf], [0xc1, 0xbf], [0xe0, 0x80, 0xaf], [0xed, 0xa0, 0x80], [0xed, 0xbf, 0xbf], [0xf4, 0x90, 0x80, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xe2, 0x82], [0xf0, 0x9f, 0x98]];
    return fc.oneof(
      fc.tuple(fc.constantFrom(...stringOffsets), fc.constantFrom(...BAD)).map(([at, bad]) => ({
        kind: 'bytes: not UTF-8',
        bytes: new Uint8Array([...utf8.subarray(0, at), ...bad, ...utf8.subarray(at)]),
        expect: 'invalid' as const,
        path: '(root)',
      })),
      fc.constant({ kind: 'bytes: UTF-8 JSON', bytes: new Uint8Array(utf8), expect: 'valid' as const, exact: true }),
      // R10.1: a BOM is refused, never skipped: the bytes must have one meaning
      fc.constant({ kind: 'bytes: UTF-8 with BOM', bytes: new Uint8Array([0xef, 0xbb, 0xbf, ...utf8]), expect: 'invalid' as const, path: '(root)' }),
      fc.constant({ kind: 'bytes: UTF-16', bytes: new Uint8Array(Buffer.from(text, 'utf16le')), expect: 'invalid' as const, path: '(root)' }),
      fc.integer({ min: 1, max: utf8.length - 1 }).map((cut) => ({ kind: 'bytes: truncated', bytes: new Uint8Array(utf8.subarray(0, cut)), expect: 'invalid' as const, path: '(root)' })),
      fc.constantFrom('1e400', '-1e400', '123456789012345678901234567890', '1.0000000000000002', '9007199254740993', '0.1', '-0', '1E3', '1e-400', '30000.000000000001', '3e4', '-0.0').map((literal) => {
        const replaced = text.replace('"timeoutMs":30000', `"timeoutMs":${literal}`);
        // R10.1: a literal that does not round-trip exactly is refused by the parser
        const lossy = roundTrip(literal) === undefined;
        const verdict = lossy ? 'invalid' : numberVerdict('timeoutMs', JSON.parse(literal) as number);
        return { kind: lossy ? 'bytes: lossy number' : 'bytes: huge number', bytes: new Uint8Array(Buffer.from(replaced)), expect: verdict, ...(verdict === 'invalid' ? { path: 'admission.timeoutMs' } : {}) };
      }),
      // R10.1: a duplicate key, at the root or nested, is refused at its path (last-one-wins
      // would let two parsers read two commands behind one digest)
      fc.constantFrom(...Object.keys(b)).map((key) => ({
        kind: 'bytes: duplicate key',
        bytes: new Uint8Array(Buffer.from(`{${JSON.stringify(key)}:${JSON.stringify((b as unknown as Record<string, unknown>)[key])},${text.slice(1)}`)),
        expect: 'invalid' as const,
        path: key,
      })),
      fc.constantFrom('"../../etc/passwd"', '"standard"', '1', 'null').map((dup) => ({
        kind: 'bytes: duplicate key',
        bytes: new Uint8Array(Buffer.from(text.replace('"profile":"standard"', `"profile":${dup},"profile":"standard"`))),
        expect: 'invalid' as const,
        path: 'admission.profile',
      })),
      fc.constant({ kind: 'bytes: lone surrogate escape', bytes: new Uint8Array(Buffer.from(text.replace('"standard"', '"\\ud800x"'))), expect: 'invalid' as const, path: 'admission.profile' }),
      fc.integer({ min: 17, max: 200_000 }).map((depth) => ({ kind: 'bytes: deep nesting', bytes: new Uint8Array(Buffer.from(text.replace('"standard"', `${'['.repeat(depth)}${']'.repeat(depth)}`))), expect: 'invalid' as const, path: depth + 2 > MAX_PARSE_DEPTH ? '(root)' : 'admission.profile' })),
    );
  });

  return fc.oneof(
    { weight: 2, arbitrary: valid },
    { weight: 3, arbitrary: sameType },
    { weight: 3, arbitrary: wrongType },
    { weight: 3, arbitrary: strings },
    { weight: 2, arbitrary: numbers },
    { weight: 2, arbitrary: missing },
    { weight: 3, arbitrary: unknownField },
    { weight: 3, arbitrary: forbiddenText },
    { weight: 2, arbitrary: notJson },
    { weight: 1, arbitrary: deep },
    { weight: 1, arbitrary: sizes },
    { weight: 1, arbitrary: topLevel },
    { weight: 3, arbitrary: bytes },
    { weight: 2, arbitrary: prototypeIds },
  );
};

const reorder = (value: unknown, seed: number): unknown => {
  let state = seed >>> 0 || 1;
  const walk = (v: unknown): unknown => {
    if (v === null || typeof v !== 'object') return v;
    const entries = Object.entries(v as Json).map(([k, x]) => [k, walk(x)] as const);
    for (let i = entries.length - 1; i > 0; i--) {
      state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
      const j = state % (i + 1);
      [entries[i], entries[j]] = [entries[j]!, entries[i]!];
    }
    return Object.fromEntries(entries);
  };
  return walk(value);
};

const nullProto = (value: unknown): unknown => {
  if (value === null || typeof value !== 'object') return value;
  const out = Object.create(null) as Json;
  for (const [k, v] of Object.entries(value as Json)) out[k] = nullProto(v);
  return out;
};

const sizedCache = new Map<string, unknown>();
/** The command with annotations that make its canonical JSON exactly `bytes` long. */
const sized = (b: ToolExecutionStartCommand, bytes: number): unknown => {
  const key = `${b.startId}:${bytes}`;
  let v = sizedCache.get(key);
  if (v === undefined) {
    const annotations = annotationsToReach(bytes, (a) => canonicalBytes({ ...b, annotations: a }));
    v = { ...b, annotations };
    if (canonicalBytes(v) !== bytes) throw new Error(`sized command is ${canonicalBytes(v)} bytes, wanted ${bytes}`);
    sizedCache.set(key, v);
  }
  return clone(v);
};

export const canonicalOf = (v: unknown): string => canonicalJson(v);
