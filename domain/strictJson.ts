import { parse, type AnyNode } from '@humanwhocodes/momoa';
import { ValidationError, type ValidationIssue } from './errors';

// R10.1: one meaning per input byte. `JSON.parse` lets the last of two equal keys win, keeps a
// leading BOM as text the caller never sees, and rounds numbers silently (1e-400 -> 0,
// 7.0000000000000001 -> 7, 2^53 + 1 -> 2^53, -0 echoed as written but stored as 0), so two
// parsers could read two commands behind one digest. momoa gives the syntax tree with each
// number's source text, so each of those is refused by path instead.

/** Deeper than any record here (the codecs allow 16 levels); bounds the recursive parse on hostile input. */
export const MAX_PARSE_DEPTH = 64;
const MAX_ISSUES = 20;

/** A decimal literal reduced to sign, significant digits and exponent, for an exact comparison. */
const normalDecimal = (text: string): string => {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (m === null) return `?${text}`;
  const digits = `${m[2]}${m[3] ?? ''}`;
  let exponent = BigInt(m[4] ?? '0') - BigInt((m[3] ?? '').length);
  const lead = digits.replace(/^0+/, '');
  if (lead === '') return '0';
  const trimmed = lead.replace(/0+$/, '');
  exponent += BigInt(lead.length - trimmed.length);
  return `${m[1]}${trimmed}e${exponent}`;
};

/** JS's shortest round-trip form (`String(n)`) names the double; the source must name the same decimal. */
const numberIssue = (raw: string, value: number): string | undefined => {
  if (!Number.isFinite(value)) return `number ${raw} overflows a double`;
  if (Object.is(value, -0)) return `negative zero (${raw}) has no canonical JSON form`;
  if (normalDecimal(raw) !== normalDecimal(String(value).replace('e+', 'e'))) {
    return value === 0 ? `number ${raw} underflows to 0` : `number ${raw} does not round-trip exactly (it reads as ${String(value)})`;
  }
  return undefined;
};

/** One linear pass before the recursive parser, so hostile nesting never reaches its stack. */
const nestingExceeds = (text: string, limit: number): boolean => {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
};

const join = (path: string, key: string): string => (path === '' ? key : `${path}.${key}`);

/** Strict JSON text -> value; every duplicate key and lossy number is an issue naming its path. */
export const parseStrictJsonText = (record: string, text: string): unknown => {
  if (text.charCodeAt(0) === 0xfeff) {
    throw new ValidationError(record, [{ path: '(root)', reason: 'invalid_json', message: 'input starts with a byte order mark (BOM); send plain UTF-8 JSON' }]);
  }
  if (nestingExceeds(text, MAX_PARSE_DEPTH)) {
    throw new ValidationError(record, [{ path: '(root)', reason: 'too_deep', message: `nested deeper than ${MAX_PARSE_DEPTH} levels` }]);
  }
  let root: AnyNode;
  try {
    root = parse(text, { mode: 'json' }).body;
  } catch (e) {
    // a RangeError is momoa's recursion on absurd nesting: still just bad input
    throw new ValidationError(record, [{ path: '(root)', reason: 'invalid_json', message: `input is not JSON: ${(e as Error).message}` }]);
  }
  const issues: ValidationIssue[] = [];
  const build = (node: AnyNode, path: string): unknown => {
    switch (node.type) {
      case 'Object': {
        // Keys are data (R10.1, ids as keys): a Map sees `__proto__` as just another name.
        const seen = new Set<string>();
        const out: Record<string, unknown> = {};
        for (const member of node.members) {
          const key = member.name.type === 'String' ? member.name.value : member.name.name;
          const at = join(path, key);
          if (seen.has(key)) {
            if (issues.length < MAX_ISSUES) issues.push({ path: at, reason: 'invalid_json', message: `duplicate key "${key}": one input must have one meaning` });
            continue;
          }
          seen.add(key);
          Object.defineProperty(out, key, { value: build(member.value, at), enumerable: true, writable: true, configurable: true });
        }
        return out;
      }
      case 'Array':
        return node.elements.map((element, i) => build(element.value, `${path}[${i}]`));
      case 'Number': {
        const raw = text.slice(node.loc.start.offset, node.loc.end.offset);
        const problem = numberIssue(raw, node.value);
        if (problem !== undefined && issues.length < MAX_ISSUES) issues.push({ path: path || '(root)', reason: 'invalid_json', message: problem });
        return node.value;
      }
      case 'String':
      case 'Boolean':
        return node.value;
      case 'Null':
        return null;
      default:
        // json mode yields none of the JSON5/JSONC node kinds; anything else is not JSON
        if (issues.length < MAX_ISSUES) issues.push({ path: path || '(root)', reason: 'invalid_json', message: `unexpected ${node.type}` });
        return null;
    }
  };
  const value = build(root, '');
  if (issues.length > 0) throw new ValidationError(record, issues);
  return value;
};

/** Strict UTF-8 JSON bytes -> value. Invalid UTF-8 is refused, never replaced with U+FFFD; a BOM is refused, never skipped. */
export const parseStrictJsonBytes = (record: string, bytes: Uint8Array | string): unknown => {
  let text: string;
  try {
    text = typeof bytes === 'string' ? bytes : new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new ValidationError(record, [{ path: '(root)', reason: 'invalid_json', message: 'input is not valid UTF-8' }]);
  }
  return parseStrictJsonText(record, text);
};
