import { hash } from 'node:crypto';
import { configure } from 'safe-stable-stringify';

// RFC 8785 (JCS) for the plain JSON values we feed it (they passed `assertPlainJson`): keys
// sorted by UTF-16 code units, strings escaped as ECMAScript JSON.stringify does, numbers in
// ECMAScript form. safe-stable-stringify produces exactly that, faster than the `canonicalize`
// package (canonical JSON is on every start's hot path); a property spec checks the two agree
// byte for byte on arbitrary JSON (specs/domain/canonical.unit.spec.ts).
// strict: NaN, Infinity, bigint and functions throw instead of becoming null.
const jcs = configure({ deterministic: true, strict: true, circularValue: Error, bigint: false });

export const canonicalJson = (value: unknown): string => {
  const out = jcs(value);
  if (out === undefined) throw new TypeError('value has no canonical JSON form');
  return out;
};

/**
 * Whether the native serialiser prints `value` as its canonical JSON: plain JSON only (strings,
 * finite numbers, booleans, null, arrays, plain objects) with every object's keys, as they are
 * enumerated, in canonical (UTF-16 code unit) order. Anything else answers false.
 */
export const inCanonicalOrder = (value: unknown): boolean => {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(value);
    case 'object':
      break;
    default:
      return false;
  }
  if (value === null) return true;
  if (Array.isArray(value)) {
    for (const v of value) if (!inCanonicalOrder(v)) return false;
    return true;
  }
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return false;
  let previous: string | undefined;
  for (const key of Object.keys(value)) {
    if (previous !== undefined && !(previous < key)) return false;
    previous = key;
    if (!inCanonicalOrder((value as Record<string, unknown>)[key])) return false;
  }
  return true;
};

/**
 * canonicalJson(value), by the native serialiser when the value's objects already list their
 * keys in canonical order (the records built here do, and so does anything parsed from
 * canonical text): no sort, no JavaScript-side escaping. Otherwise canonicalJson itself.
 */
export const canonicalJsonOf = (value: unknown): string => (inCanonicalOrder(value) ? JSON.stringify(value) : canonicalJson(value));

const UNSURE: unique symbol = Symbol('unsure');

const sortedCopy = (value: unknown): unknown => {
  if (typeof value !== 'object' || value === null) return value === 0 ? 0 : value; // -0 reads back as 0
  if (Array.isArray(value)) {
    const out = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) if ((out[i] = sortedCopy(value[i])) === UNSURE) return UNSURE;
    return out;
  }
  const keys = Object.keys(value).sort();
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    // Integer-like keys enumerate first whatever the insertion order, and `__proto__` would set
    // the prototype: neither can be copied in canonical order by assignment.
    const first = key.charCodeAt(0);
    if ((first >= 0x30 && first <= 0x39) || key === '__proto__') return UNSURE;
    if ((out[key] = sortedCopy((value as Record<string, unknown>)[key])) === UNSURE) return UNSURE;
  }
  return out;
};

/**
 * For plain JSON (plainJsonIssues found nothing): a private deep copy with every object's keys
 * in canonical order, the value JSON.parse(canonicalJson(value)) gives, and its canonical text
 * (printed natively); one walk instead of a sorting serialiser and a parse. Undefined where an
 * object has a key that cannot be copied in order (integer-like, `__proto__`).
 */
export const canonicalCopyOf = (value: unknown): { readonly copy: unknown; readonly canonical: string } | undefined => {
  const copy = sortedCopy(value);
  return copy === UNSURE ? undefined : { copy, canonical: JSON.stringify(copy) };
};

/** Whether every object of a parsed JSON value lists its keys in canonical (UTF-16 code unit) order. */
const keysInCanonicalOrder = (value: unknown): boolean => {
  if (typeof value !== 'object' || value === null) return true;
  if (Array.isArray(value)) {
    for (const v of value) if (!keysInCanonicalOrder(v)) return false;
    return true;
  }
  let previous: string | undefined;
  for (const key of Object.keys(value)) {
    if (previous !== undefined && !(previous < key)) return false;
    previous = key;
    if (!keysInCanonicalOrder((value as Record<string, unknown>)[key])) return false;
  }
  return true;
};

/**
 * `canonicalJson(value) === text` for a value JSON.parse made from `text`, without sorting or
 * serialising twice: JSON.parse keeps the text's key order, so the native serialiser gives the
 * text back only if it has no whitespace, the ES number form and minimal escapes, and the keys
 * it printed are canonical only if they were in order. Either question failing answers false,
 * which the callers treat as "not proven" (the full check then runs).
 */
export const isCanonicalTextOf = (value: unknown, text: string): boolean => JSON.stringify(value) === text && keysInCanonicalOrder(value);

/**
 * The canonical text of an object without one of its top-level members, cut from the object's
 * own canonical text: the keys left stay sorted. `member` is that member's exact text
 * (`"key":value`); it must occur once, so it is the top-level one, or the answer is undefined.
 */
export const canonicalWithout = (text: string, member: string): string | undefined => {
  const at = text.indexOf(member);
  if (at <= 0 || text.indexOf(member, at + 1) >= 0) return undefined;
  const end = at + member.length;
  return text[at - 1] === ',' ? text.slice(0, at - 1) + text.slice(end) : text[end] === ',' ? text.slice(0, at) + text.slice(end + 1) : text.slice(0, at) + text.slice(end);
};

export const utf8Length = (text: string): number => Buffer.byteLength(text, 'utf8');

/** Record kinds, each with its own digest tag (R1.3: a command can never collide with a barrier). */
export const RECORD_TAGS = {
  command: 'qinglong/tool-execution-start-command@v1',
  barrier: 'qinglong/tool-execution-start-barrier@v1',
  stepRun: 'qinglong/step-run@v1',
  mutation: 'qinglong/step-run-mutation@v1',
  traceAnchor: 'qinglong/trace-anchor@v1',
  auditEvent: 'qinglong/security-audit-event@v1',
  auditReceipt: 'qinglong/audit-receipt@v1',
  resolutionNote: 'qinglong/resolution-note@v1',
  runCompaction: 'qinglong/run-compaction@v1',
  compactedLog: 'qinglong/compacted-log@v1',
} as const;
export type RecordTag = (typeof RECORD_TAGS)[keyof typeof RECORD_TAGS];

export const DIGEST_PATTERN = /^sha256:[0-9a-f]{64}$/;

/**
 * sha256(tag || 0x00 || canonical-json). The NUL cannot occur in a tag, and JSON text never
 * starts with one, so the (tag, body) split is unambiguous.
 */
export const digestCanonical = (tag: RecordTag, canonical: string): string =>
  // One-shot hash of the same bytes: a third cheaper than a Hash object for texts this small,
  // and every verified read digests seven of them.
  'sha256:' + hash('sha256', `${tag}\u0000${canonical}`, 'hex');

export const digestOf = (tag: RecordTag, value: unknown): string => digestCanonical(tag, canonicalJsonOf(value));
