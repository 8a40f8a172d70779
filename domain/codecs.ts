import { types } from 'node:util';
import * as t from 'io-ts';
import { isLeft, type Left } from 'fp-ts/lib/Either';
import { DIGEST_PATTERN } from './canonical';
import { ValidationError, type ValidationIssue, type ValidationReason } from './errors';
import { parseStrictJsonBytes } from './strictJson';

// io-ts at every boundary. io-ts' own `exact`/`strict` strip unknown keys; R1.5 says reject,
// so objects here go through `strictObject`, which fails on any key it does not name.

const MAX_DEPTH = 16;

/** Reasons ride in the io-ts message as `reason|text`, so one failure type serves all paths. */
const fail = (u: unknown, c: t.Context, reason: ValidationReason, text: string): Left<t.Errors> =>
  ({ _tag: 'Left', left: [{ value: u, context: c, message: `${reason}|${text}` }] });

const isPlainObject = (u: unknown): u is Record<string, unknown> => {
  if (typeof u !== 'object' || u === null || Array.isArray(u)) return false;
  const proto = Object.getPrototypeOf(u);
  return proto === Object.prototype || proto === null;
};

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Only JSON values may enter: no functions, raw errors, class instances, undefined, NaN,
 * bigint, lone surrogates (not encodable as UTF-8) or nesting deeper than MAX_DEPTH.
 */
export const plainJsonIssues = (value: unknown, path = '', depth = 0, out: ValidationIssue[] = []): ValidationIssue[] => {
  const at = path === '' ? '(root)' : path;
  if (out.length >= 20) return out;
  if (depth > MAX_DEPTH) {
    out.push({ path: at, reason: 'too_deep', message: `nested deeper than ${MAX_DEPTH} levels` });
    return out;
  }
  switch (typeof value) {
    case 'string':
      if (LONE_SURROGATE.test(value)) out.push({ path: at, reason: 'invalid_value', message: 'string is not well-formed Unicode (cannot be UTF-8)' });
      return out;
    case 'boolean':
      return out;
    case 'number':
      if (!Number.isFinite(value)) out.push({ path: at, reason: 'invalid_value', message: 'number is not finite' });
      return out;
    case 'function':
      out.push({ path: at, reason: 'forbidden_value', message: 'functions are forbidden (R1.5)' });
      return out;
    case 'undefined':
      out.push({ path: at, reason: 'invalid_value', message: 'undefined is not JSON (omit the field instead)' });
      return out;
    case 'bigint':
    case 'symbol':
      out.push({ path: at, reason: 'invalid_value', message: `${typeof value} is not JSON` });
      return out;
    default:
      break;
  }
  if (value === null) return out;
  // A proxy or a getter can answer differently on every read: what was validated would not be
  // what gets digested and stored. Only plain data properties are read, never a getter.
  if (types.isProxy(value)) {
    out.push({ path: at, reason: 'forbidden_value', message: 'proxies are not JSON data' });
    return out;
  }
  // One descriptor per key, read once: Object.getOwnPropertyDescriptors + entries builds two
  // arrays per object and dominated this check on the start path.
  let accessor = false;
  const obj = value as object; // the switch above returned for every non-object
  for (const k of Reflect.ownKeys(obj)) {
    const d = Reflect.getOwnPropertyDescriptor(obj, k);
    if (d === undefined || !d.enumerable || 'value' in d) continue;
    accessor = true;
    const key = String(k);
    out.push({ path: Array.isArray(value) ? `${path}[${key}]` : path === '' ? key : `${path}.${key}`, reason: 'forbidden_value', message: 'accessor properties are not JSON data' });
  }
  if (accessor) return out;
  if (value instanceof Error) {
    out.push({ path: at, reason: 'forbidden_value', message: 'raw exceptions are forbidden (R1.5)' });
    return out;
  }
  if (Array.isArray(value)) {
    value.forEach((v, i) => plainJsonIssues(v, `${path}[${i}]`, depth + 1, out));
    return out;
  }
  if (!isPlainObject(value)) {
    out.push({ path: at, reason: 'forbidden_value', message: 'only plain JSON objects are accepted' });
    return out;
  }
  for (const [k, v] of Object.entries(value)) {
    const p = path === '' ? k : `${path}.${k}`;
    if (LONE_SURROGATE.test(k)) out.push({ path: p, reason: 'invalid_value', message: 'key is not well-formed Unicode' });
    plainJsonIssues(v, p, depth + 1, out);
  }
  return out;
};

const NOT_PLAIN: unique symbol = Symbol('not plain');
/**
 * The well-formed serialiser prints a lone surrogate, in a string or a key, as a lowercase
 * `\udXXX` escape, and a pair as itself: text without this has none. An escaped backslash
 * before such letters matches too, and is left to the long way.
 */
const LONE_SURROGATE_ESCAPE = /\\ud[89a-f]/;

const plainSorted = (value: unknown, depth: number): unknown => {
  if (depth > MAX_DEPTH) return NOT_PLAIN;
  switch (typeof value) {
    case 'string': // lone surrogates: found in the printed text, one scan (plainCanonicalCopyOf)
    case 'boolean':
      return value;
    case 'number':
      return Number.isFinite(value) ? (value === 0 ? 0 : value) : NOT_PLAIN; // -0 reads back as 0
    case 'object':
      break;
    default:
      return NOT_PLAIN;
  }
  if (value === null) return null;
  if (types.isProxy(value)) return NOT_PLAIN;
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype || Reflect.ownKeys(value).length !== value.length + 1) return NOT_PLAIN; // holes, extra keys
    const out = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) {
      const d = Reflect.getOwnPropertyDescriptor(value, i);
      if (d === undefined || !('value' in d) || (out[i] = plainSorted(d.value, depth + 1)) === NOT_PLAIN) return NOT_PLAIN;
    }
    return out;
  }
  if (!isPlainObject(value) || value instanceof Error) return NOT_PLAIN;
  if (Object.getOwnPropertySymbols(value).length > 0) return NOT_PLAIN;
  const keys = Object.getOwnPropertyNames(value).sort();
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    const d = Reflect.getOwnPropertyDescriptor(value, key)!;
    if (!('value' in d)) return NOT_PLAIN;
    if (!d.enumerable) continue;
    // Integer-like keys enumerate first whatever the insertion order, and `__proto__` would set
    // the prototype: neither can be copied in canonical order by assignment.
    const first = key.charCodeAt(0);
    if ((first >= 0x30 && first <= 0x39) || key === '__proto__') return NOT_PLAIN;
    if ((out[key] = plainSorted(d.value, depth + 1)) === NOT_PLAIN) return NOT_PLAIN;
  }
  return out;
};

/**
 * plainJsonIssues and canonicalCopyOf in one walk, for the common case: when `value` is plain
 * JSON that plainJsonIssues has nothing to say about, in one common shape (no holes, no
 * symbol keys, no non-enumerable accessors, no integer-like or `__proto__` key), a private deep
 * copy with every object's keys in canonical order (what parsing its canonical text gives) and
 * that text, printed natively. Undefined otherwise: the caller then asks plainJsonIssues, which
 * names every problem, and copies the long way.
 */
export const plainCanonicalCopyOf = (value: unknown): { readonly copy: unknown; readonly canonical: string } | undefined => {
  const copy = plainSorted(value, 0);
  if (copy === NOT_PLAIN) return undefined;
  const canonical = JSON.stringify(copy);
  return LONE_SURROGATE_ESCAPE.test(canonical) ? undefined : { copy, canonical };
};

// Field names that would carry what R1.5 forbids. Any unknown key is rejected; these get the
// sharper reason so an integrator sees why the field can never be added.
const FORBIDDEN_KEY_PARTS = [
  'input', 'args', 'argument', 'params', 'parameter', 'payload', 'secret', 'password', 'passwd', 'token', 'credential', 'apikey',
  'api_key', 'privatekey', 'handler', 'function', 'callback', 'execute', 'exec', 'seam', 'module',
  'path', 'url', 'uri', 'endpoint', 'href', 'output', 'result', 'exception', 'error', 'stack',
];
export const isForbiddenKey = (key: string): boolean => {
  const k = key.toLowerCase();
  return FORBIDDEN_KEY_PARTS.some((p) => k.includes(p));
};

type RequiredOf<P extends t.Props> = { [K in keyof P]: t.TypeOf<P[K]> };
type OptionalOf<O extends t.Props> = { [K in keyof O]?: t.TypeOf<O[K]> };
export type StrictObjectC<P extends t.Props, O extends t.Props> = t.Type<
  RequiredOf<P> & OptionalOf<O>,
  RequiredOf<P> & OptionalOf<O>,
  unknown
>;

/**
 * An object codec that rejects (never strips) unknown fields, naming each with its path. A
 * record's unknown field whose name says input, secret, URL and the like gets R1.5's sharper
 * reason; `record: false` (a configuration, not a record) calls every one unknown.
 */
export const strictObject = <P extends t.Props, O extends t.Props = Record<never, never>>(
  name: string,
  required: P,
  optional: O = {} as O,
  record = true,
): StrictObjectC<P, O> => {
  const known = new Set([...Object.keys(required), ...Object.keys(optional)]);
  type A = RequiredOf<P> & OptionalOf<O>;
  const requiredEntries = Object.entries(required);
  const optionalEntries = Object.entries(optional);
  // The same verdict as `validate`, without building a context per field: the check-only
  // reads (checkRecords.ts) ask only whether a stored record is valid, never where it is not.
  const is = (u: unknown): u is A => {
    if (!isPlainObject(u)) return false;
    for (const key of Object.keys(u)) if (!known.has(key)) return false;
    for (const [key, codec] of requiredEntries) if (!(key in u) || !codec.is(u[key])) return false;
    for (const [key, codec] of optionalEntries) if (key in u && !codec.is(u[key])) return false;
    return true;
  };
  const validate = (u: unknown, c: t.Context): t.Validation<A> => {
    if (!isPlainObject(u)) return fail(u, c, 'invalid_value', `expected an object (${name})`);
    const errors: t.Errors = [];
    for (const key of Object.keys(u)) {
      if (known.has(key)) continue;
      const ctx = [...c, { key, type: t.never, actual: u[key] }];
      errors.push(
        ...(record && isForbiddenKey(key)
          ? fail(u[key], ctx, 'forbidden_field', `field "${key}" is forbidden: admission, command and barrier never carry input, secrets, handlers, module paths, URLs, output or exceptions (R1.5)`)
          : fail(u[key], ctx, 'unknown_field', `unknown field "${key}" (rejected, not stripped)`)
        ).left,
      );
    }
    for (const [key, codec] of Object.entries(required)) {
      const ctx = [...c, { key, type: codec, actual: u[key] }];
      if (!(key in u)) {
        errors.push(...fail(undefined, ctx, 'invalid_value', 'required field is missing').left);
        continue;
      }
      const r = codec.validate(u[key], ctx);
      if (isLeft(r)) errors.push(...r.left);
    }
    for (const [key, codec] of Object.entries(optional)) {
      if (!(key in u)) continue;
      const r = codec.validate(u[key], [...c, { key, type: codec, actual: u[key] }]);
      if (isLeft(r)) errors.push(...r.left);
    }
    return errors.length > 0 ? t.failures(errors) : t.success(u as A);
  };
  return new t.Type<A, A, unknown>(name, is, validate, t.identity);
};

/** A string codec whose `check` names what is wrong with a value (undefined: nothing). */
export const refinedString = (
  name: string,
  check: (s: string) => { reason: ValidationReason; text: string } | undefined,
  passes: (s: string) => boolean = (s) => check(s) === undefined,
) =>
  new t.Type<string, string, unknown>(
    name,
    (u): u is string => typeof u === 'string' && passes(u),
    (u, c) => {
      if (typeof u !== 'string') return fail(u, c, 'invalid_value', `expected a string (${name})`);
      const problem = check(u);
      return problem ? fail(u, c, problem.reason, problem.text) : t.success(u);
    },
    t.identity,
  );

const URL_LIKE = /^[a-z][a-z0-9+.-]*:|:\/\/|^www\./i;
const PATH_LIKE = /[/\\~]|^\.\.?$|\.(?:m?js|cjs|ts|mts|cts|json|node|sh|py|rb|exe|dll|so|dylib|wasm)$/i;
const SECRET_LIKE =
  /-----BEGIN|\bAKIA[0-9A-Z]{16}\b|\bsk-[A-Za-z0-9_-]{16,}|\bgh[pousr]_[A-Za-z0-9]{20,}|\bxox[abprs]-|\beyJ[A-Za-z0-9_-]{8,}\.eyJ|\b(?:password|passwd|secret|token|api[_-]?key)\s*[:=]/i;
// Every quantifier below is bounded: these run on attacker-sized text (up to 64 KiB), and an
// unbounded `\s*…\s*` pair backtracks quadratically (70 s for "function" + 8,000 spaces).
const CODE_LIKE = /\bfunction[\s*]{0,16}[A-Za-z0-9_$]{0,64}\s{0,16}\(|=>|\b(?:require|import|eval)\s{0,16}\(/;
const EXCEPTION_LIKE = /^[ \t]{0,32}at [^\n()]{1,256}\([^\n()]{1,512}:\d{1,9}:\d{1,9}\)|\n[ \t]{1,32}at |\b[A-Z][A-Za-z]{0,64}Error: /m;
const TEXT_PATH_LIKE = /(?:^|\s)(?:\.{1,2}\/|~\/|\/[A-Za-z0-9_.-]+\/|[A-Za-z]:\\)/;
/** URLs in text, with or without a scheme: `x://`, `https:`, protocol-relative `//host`, `www.host`. */
const TEXT_URL_LIKE = /:\/\/|\b(?:https?|file|data|javascript|mailto|ftp|wss?):|(?:^|[\s("'<[])\/\/[A-Za-z0-9]|\bwww\.[A-Za-z0-9-]/i;
const MODULE_FILE = /\.(?:m?js|cjs|ts|mts|cts|json|node|sh|py|rb|exe|dll|so|dylib|wasm)(?![A-Za-z0-9])/i;
/**
 * Module paths in text: `node_modules`, or a word holding a separator and a code or module file
 * name. Word by word, so the cost stays linear in the text (no backtracking across it).
 */
const textHasModulePath = (s: string): boolean =>
  /\bnode_modules\b/.test(s) || s.split(/\s+/).some((word) => /[/\\]/.test(word) && MODULE_FILE.test(word));
const IDENTITY_CHARS = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/**
 * `Identity.is` without the URL and path expressions' alternatives that identity characters
 * cannot match (no `:`, separator or `~`, and a letter or digit first): `www.` first and a code
 * file's extension last are all that is left of them. The same verdict as the checks below
 * (property spec); verified reads ask it of every identity of every record.
 */
const WWW_FIRST = /^www\./i;
const MODULE_FILE_LAST = /\.(?:m?js|cjs|ts|mts|cts|json|node|sh|py|rb|exe|dll|so|dylib|wasm)$/i;
const isIdentity = (s: string): boolean => IDENTITY_CHARS.test(s) && !WWW_FIRST.test(s) && !MODULE_FILE_LAST.test(s) && !SECRET_LIKE.test(s);

/** Opaque identity: short, no scheme, no path separators, no code file, nothing secret-like. */
export const Identity = refinedString('Identity', (s) => {
  if (s.length === 0 || s.length > 128) return { reason: 'invalid_value', text: 'identity must be 1..128 characters' };
  if (URL_LIKE.test(s)) return { reason: 'forbidden_value', text: 'identity looks like a URL (R1.5)' };
  if (PATH_LIKE.test(s)) return { reason: 'forbidden_value', text: 'identity looks like a path or module file (R1.5)' };
  if (SECRET_LIKE.test(s)) return { reason: 'forbidden_value', text: 'identity looks like a secret (R1.5)' };
  if (!IDENTITY_CHARS.test(s)) return { reason: 'invalid_value', text: 'identity may hold only A-Z a-z 0-9 . _ - and must start with a letter or digit' };
  return undefined;
}, isIdentity);

export const Digest = refinedString('Digest', (s) =>
  DIGEST_PATTERN.test(s) ? undefined : { reason: 'invalid_value', text: 'digest must be sha256:<64 lowercase hex>' },
);

/** Low-sensitivity operator text (annotations). Never a carrier for what R1.5 forbids. */
export const SafeText = refinedString('SafeText', (s) => {
  if (s.length > 8192) return { reason: 'invalid_value', text: 'text longer than 8192 characters' };
  if (/[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/.test(s)) return { reason: 'invalid_value', text: 'control characters are not allowed' };
  if (TEXT_URL_LIKE.test(s)) return { reason: 'forbidden_value', text: 'text contains a URL (R1.5)' };
  if (TEXT_PATH_LIKE.test(s) || textHasModulePath(s)) return { reason: 'forbidden_value', text: 'text contains a path (R1.5)' };
  if (SECRET_LIKE.test(s)) return { reason: 'forbidden_value', text: 'text looks like it carries a secret (R1.5)' };
  if (CODE_LIKE.test(s)) return { reason: 'forbidden_value', text: 'text looks like code (R1.5)' };
  if (EXCEPTION_LIKE.test(s)) return { reason: 'forbidden_value', text: 'text looks like a raw exception (R1.5)' };
  return undefined;
});

const ANNOTATION_KEY = /^[a-z][a-z0-9_.-]{0,63}$/;
export const Annotations = new t.Type<Record<string, string>, Record<string, string>, unknown>(
  'Annotations',
  (u): u is Record<string, string> =>
    isPlainObject(u) && Object.keys(u).length <= 64 && Object.entries(u).every(([k, v]) => ANNOTATION_KEY.test(k) && !isForbiddenKey(k) && SafeText.is(v)),
  (u, c) => {
    if (!isPlainObject(u)) return fail(u, c, 'invalid_value', 'annotations must be an object of text');
    const entries = Object.entries(u);
    if (entries.length > 64) return fail(u, c, 'invalid_value', 'at most 64 annotations');
    const errors: t.Errors = [];
    for (const [k, v] of entries) {
      const ctx = [...c, { key: k, type: SafeText, actual: v }];
      if (!ANNOTATION_KEY.test(k)) {
        errors.push(...fail(v, ctx, isForbiddenKey(k) ? 'forbidden_field' : 'invalid_value', 'annotation key must match ^[a-z][a-z0-9_.-]{0,63}$ and name nothing R1.5 forbids').left);
      } else if (isForbiddenKey(k)) {
        errors.push(...fail(v, ctx, 'forbidden_field', `annotation "${k}" is forbidden (R1.5)`).left);
      } else {
        const r = SafeText.validate(v, ctx);
        if (isLeft(r)) errors.push(...r.left);
      }
    }
    return errors.length > 0 ? t.failures(errors) : t.success(u as Record<string, string>);
  },
  t.identity,
);

export const integer = (name: string, min: number, max: number) =>
  new t.Type<number, number, unknown>(
    name,
    (u): u is number => typeof u === 'number' && Number.isSafeInteger(u) && u >= min && u <= max,
    (u, c) =>
      typeof u === 'number' && Number.isSafeInteger(u) && u >= min && u <= max
        ? t.success(u)
        : fail(u, c, 'invalid_value', `expected an integer in ${min}..${max} (${name})`),
    t.identity,
  );

export const Version = integer('Version', 1, Number.MAX_SAFE_INTEGER);
export const Sequence = integer('Sequence', 1, Number.MAX_SAFE_INTEGER);
export const EpochMillis = integer('EpochMillis', 0, 8_640_000_000_000_000);
export const TimeoutMs = integer('TimeoutMs', 1, 86_400_000);

export const literal = <V extends string>(value: V) =>
  new t.Type<V, V, unknown>(
    JSON.stringify(value),
    (u): u is V => u === value,
    (u, c) => (u === value ? t.success(value) : fail(u, c, 'invalid_value', `expected ${JSON.stringify(value)}`)),
    t.identity,
  );

export const oneOf = <V extends string>(values: readonly V[]) =>
  new t.Type<V, V, unknown>(
    values.join('|'),
    (u): u is V => typeof u === 'string' && (values as readonly string[]).includes(u),
    (u, c) =>
      typeof u === 'string' && (values as readonly string[]).includes(u)
        ? t.success(u as V)
        : fail(u, c, 'invalid_value', `expected one of ${values.map((v) => JSON.stringify(v)).join(', ')}`),
    t.identity,
  );

/** `{ id, digest }`: the shape of every reviewed artefact a start binds (R1.4). */
export const Ref = strictObject('Ref', { id: Identity, digest: Digest });
export type Ref = t.TypeOf<typeof Ref>;

const pathOf = (context: t.Context): string => {
  const keys: string[] = [];
  context.forEach((entry, i) => {
    if (i === 0 || entry.key === '') return;
    keys.push(Array.isArray(context[i - 1]?.actual) ? `[${entry.key}]` : entry.key);
  });
  return keys.join('.') || '(root)';
};

export const toIssues = (errors: t.Errors): ValidationIssue[] =>
  errors.map((e) => {
    const raw = e.message ?? `invalid_value|expected ${e.context[e.context.length - 1]?.type.name ?? 'a value'}`;
    const sep = raw.indexOf('|');
    return {
      path: pathOf(e.context),
      reason: (sep > 0 ? raw.slice(0, sep) : 'invalid_value') as ValidationReason,
      message: sep > 0 ? raw.slice(sep + 1) : raw,
    };
  });

/**
 * Decode or throw the typed validation error. JSON shape first, then the codec, on a private
 * copy: what was validated is what the caller gets back, and a caller that changes its object
 * afterwards (say, while an async `prepare` waits for its transaction) cannot reach it.
 */
/**
 * Checks that `input` is plain JSON and returns a private deep copy of it, so nothing the
 * caller does afterwards (or a getter that answers differently twice) can change what we decode.
 */
export const snapshotPlainJson = (record: string, input: unknown): unknown => {
  const shape = plainJsonIssues(input);
  if (shape.length > 0) throw new ValidationError(record, shape);
  return structuredClone(input);
};

/** Decode a value `snapshotPlainJson` returned; the codecs hand back that same object when valid. */
export const decodeSnapshotOrThrow = <A>(codec: t.Type<A, A, unknown>, record: string, snapshot: unknown): A => {
  const r = codec.decode(snapshot);
  if (isLeft(r)) throw new ValidationError(record, toIssues(r.left));
  return r.right;
};

export const decodeOrThrow = <A>(codec: t.Type<A, A, unknown>, record: string, input: unknown): A =>
  decodeSnapshotOrThrow(codec, record, snapshotPlainJson(record, input));

/** Strict UTF-8 JSON text -> value (R10.1): see strictJson.ts. */
export const parseJsonBytes = (record: string, bytes: Uint8Array | string): unknown => parseStrictJsonBytes(record, bytes);
