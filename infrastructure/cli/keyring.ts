import { fstatSync } from 'node:fs';
import { ValidationError, parseJsonBytes, type ValidationIssue } from '../../domain';
import { MIN_KEY_BYTES, isKeyId, type EvidenceKey, type EvidenceKeyringOptions } from '../../application/evidenceKeys';
import { MAX_INPUT_BYTES, readBoundedFile } from './input';

// The CLI's deployment keyring (R9.4) comes from a key file named by an environment variable,
// never from a command-line value (which would land in shell history, `ps` and logs):
//
//   QINGLONG_BARRIER_KEYRING_FILE=/etc/qinglong/barrier-keys.json
//   { "active": "k2", "keys": { "k1": "<base64 of >= 32 bytes>", "k2": "<base64>" } }
//
// `active` seals new starts; every other key is verify-only (kept after a rotation). The file
// is read as strictly as any input (R14.1): at most MAX_INPUT_BYTES (a bounded read, so
// `/dev/zero` or a FIFO that never ends is refused, not waited on), strict UTF-8 JSON (a key id
// given twice is refused, never last-wins), each key canonical base64 of at least 32 bytes, and
// readable by its owner alone: a file group or others may read (or write) is refused unless
// QINGLONG_BARRIER_KEYRING_ALLOW_SHARED=1, which lets it through with a warning. Each refusal
// is a VALIDATION_FAILED (exit 2) naming what is wrong, before anything is opened or written.
// Messages name the file, a field or a key id, never a key's value. The plan key file
// (planKeyring.ts) is read by the same functions.

export const KEYRING_FILE_ENV = 'QINGLONG_BARRIER_KEYRING_FILE';
export const KEYRING_ALLOW_SHARED_ENV = 'QINGLONG_BARRIER_KEYRING_ALLOW_SHARED';

/** One key file: where it is, what named it (an option or a variable) and the record its errors name. */
export interface KeyFile {
  readonly path: string;
  readonly namedBy: string;
  readonly record: string;
}

const issue = (path: string, message: string, reason: ValidationIssue['reason'] = 'invalid_value'): ValidationIssue => ({ path, reason, message });
export const keyFileError = (file: Pick<KeyFile, 'record' | 'namedBy'>, message: string, path = file.namedBy, reason: ValidationIssue['reason'] = 'invalid_value') =>
  new ValidationError(file.record, [issue(path, message, reason)]);

/** Canonical base64: what decodes and encodes back to the same text (no whitespace, padding as written). */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export const quoteId = (id: string) => JSON.stringify(id.slice(0, 64));

/** Group or others may read or write it: the key is no longer the owner's alone. */
const SHARED_BITS = 0o077;

const checkPermissions = (file: KeyFile, fd: number, allowShared: boolean, warn: (line: string) => void): void => {
  if (process.platform === 'win32') return; // no POSIX mode bits to read there
  const mode = fstatSync(fd).mode & 0o777;
  if ((mode & SHARED_BITS) === 0) return;
  const what = `${file.path} has mode 0${mode.toString(8)}: group or others may ${mode & 0o044 ? 'read' : 'write'} the key`;
  if (!allowShared) throw keyFileError(file, `${what}; make it readable by its owner alone (chmod 600), or set ${KEYRING_ALLOW_SHARED_ENV}=1 to use it anyway`);
  warn(`warning: ${what} (${KEYRING_ALLOW_SHARED_ENV}=1 lets it be used)`);
};

/**
 * The strict parser's issues, for a file that holds secrets: a syntax error's message may quote
 * the text around it (part of a key), so only where it is and what kind of problem is said.
 */
const parseKeyFileBytes = (file: KeyFile, bytes: Buffer): unknown => {
  try {
    return parseJsonBytes(file.record, bytes);
  } catch (e) {
    if (!(e instanceof ValidationError)) throw e;
    throw new ValidationError(
      file.record,
      e.issues.map((i) => (i.message.startsWith('input is not JSON') ? issue(i.path, `${file.path} is not JSON (the parser's message is not shown: it may quote a key)`, i.reason) : { ...i, message: `${file.path}: ${i.message}` })),
    );
  }
};

export interface KeyringEnvironmentOptions {
  /** Where a warning goes (a shared file let through); stderr by default. */
  readonly warn?: (line: string) => void;
}

/**
 * A key file's top-level object, read bounded, strict and owner-only (unless the environment
 * allows a shared one): `active` a string, `keys` an object, no field beyond `known`.
 */
export const readKeyFile = (file: KeyFile, env: NodeJS.ProcessEnv, options: KeyringEnvironmentOptions, known: readonly string[]): Record<string, unknown> & { active: string; keys: Record<string, unknown> } => {
  const allow = env[KEYRING_ALLOW_SHARED_ENV];
  if (allow !== undefined && allow !== '' && allow !== '0' && allow !== '1') throw keyFileError(file, `must be 1 or 0, not ${JSON.stringify(allow.slice(0, 16))}`, KEYRING_ALLOW_SHARED_ENV);
  const warn = options.warn ?? ((line: string) => void process.stderr.write(`${line}\n`));
  let bytes: Buffer;
  try {
    bytes = readBoundedFile(file.path, file.record, file.namedBy, (fd) => checkPermissions(file, fd, allow === '1', warn));
  } catch (e) {
    if (e instanceof ValidationError && e.reason === 'too_large') throw keyFileError(file, `${file.path} is larger than ${MAX_INPUT_BYTES} bytes`, file.namedBy, 'too_large');
    throw e;
  }
  const parsed = parseKeyFileBytes(file, bytes);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw keyFileError(file, `${file.path}: expected an object with "active" and "keys"`, '(root)');
  const fields = parsed as Record<string, unknown>;
  const extra = Object.keys(fields).filter((k) => !known.includes(k));
  if (extra.length > 0) throw keyFileError(file, `${file.path}: unknown field(s) ${extra.map((k) => JSON.stringify(k.slice(0, 40))).join(', ')}`, extra[0]!.slice(0, 40), 'unknown_field');
  if (typeof fields.active !== 'string') throw keyFileError(file, `${file.path}: "active" must be a key id`, 'active');
  if (typeof fields.keys !== 'object' || fields.keys === null || Array.isArray(fields.keys)) throw keyFileError(file, `${file.path}: "keys" must map key ids to base64 key material`, 'keys');
  return fields as Record<string, unknown> & { active: string; keys: Record<string, unknown> };
};

/** Each key decoded from canonical base64, its length checked by `sizeProblem` (a message, or undefined); every fault at once. */
export const decodeKeys = (file: KeyFile, keys: Record<string, unknown>, sizeProblem: (id: string, bytes: number) => string | undefined): EvidenceKey[] => {
  const issues: ValidationIssue[] = [];
  const all: EvidenceKey[] = [];
  for (const [id, value] of Object.entries(keys)) {
    const at = `keys.${id.slice(0, 64)}`;
    if (!isKeyId(id)) issues.push(issue(at, `key id ${quoteId(id)} must be 1..64 letters, digits, ".", "_" or "-"`));
    else if (typeof value !== 'string' || value === '' || !BASE64.test(value)) issues.push(issue(at, `key ${quoteId(id)} is not canonical base64`));
    else {
      const secret = Buffer.from(value, 'base64');
      const problem = sizeProblem(id, secret.byteLength);
      if (problem !== undefined) issues.push(issue(at, problem));
      else all.push({ id, secret });
    }
  }
  if (issues.length > 0) throw new ValidationError(file.record, issues);
  return all;
};

/** The keyring named by the environment, or undefined (no keyed evidence: today's behaviour). */
export const keyringFromEnvironment = (env: NodeJS.ProcessEnv = process.env, options: KeyringEnvironmentOptions = {}): EvidenceKeyringOptions | undefined => {
  const path = env[KEYRING_FILE_ENV];
  if (path === undefined || path === '') return undefined;
  const file: KeyFile = { path, namedBy: KEYRING_FILE_ENV, record: 'keyring file' };
  const { active, keys } = readKeyFile(file, env, options, ['active', 'keys']);
  const all = decodeKeys(file, keys, (id, n) => (n < MIN_KEY_BYTES ? `key ${quoteId(id)} is ${n} byte(s); a key must be at least ${MIN_KEY_BYTES} bytes` : undefined));
  const current = all.find((k) => k.id === active);
  if (current === undefined) throw keyFileError(file, `${path}: the active key ${quoteId(active)} is not among "keys"`, 'active');
  return { active: current, verifyOnly: all.filter((k) => k !== current) };
};
