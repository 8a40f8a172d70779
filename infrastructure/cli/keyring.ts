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
// Messages name the file, a field or a key id, never a key's value.

export const KEYRING_FILE_ENV = 'QINGLONG_BARRIER_KEYRING_FILE';
export const KEYRING_ALLOW_SHARED_ENV = 'QINGLONG_BARRIER_KEYRING_ALLOW_SHARED';

const RECORD = 'keyring file';

const issue = (path: string, message: string, reason: ValidationIssue['reason'] = 'invalid_value'): ValidationIssue => ({ path, reason, message });
const bad = (message: string, path = KEYRING_FILE_ENV, reason: ValidationIssue['reason'] = 'invalid_value') => new ValidationError(RECORD, [issue(path, message, reason)]);

/** Canonical base64: what decodes and encodes back to the same text (no whitespace, padding as written). */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

const quoteId = (id: string) => JSON.stringify(id.slice(0, 64));

/** Group or others may read or write it: the key is no longer the owner's alone. */
const SHARED_BITS = 0o077;

const checkPermissions = (path: string, fd: number, allowShared: boolean, warn: (line: string) => void): void => {
  if (process.platform === 'win32') return; // no POSIX mode bits to read there
  const mode = fstatSync(fd).mode & 0o777;
  if ((mode & SHARED_BITS) === 0) return;
  const what = `${path} has mode 0${mode.toString(8)}: group or others may ${mode & 0o044 ? 'read' : 'write'} the key`;
  if (!allowShared) throw bad(`${what}; make it readable by its owner alone (chmod 600), or set ${KEYRING_ALLOW_SHARED_ENV}=1 to use it anyway`);
  warn(`warning: ${what} (${KEYRING_ALLOW_SHARED_ENV}=1 lets it be used)`);
};

/**
 * The strict parser's issues, for a file that holds secrets: a syntax error's message may quote
 * the text around it (part of a key), so only where it is and what kind of problem is said.
 */
const parseKeyringBytes = (path: string, bytes: Buffer): unknown => {
  try {
    return parseJsonBytes(RECORD, bytes);
  } catch (e) {
    if (!(e instanceof ValidationError)) throw e;
    throw new ValidationError(
      RECORD,
      e.issues.map((i) => (i.message.startsWith('input is not JSON') ? issue(i.path, `${path} is not JSON (the parser's message is not shown: it may quote a key)`, i.reason) : { ...i, message: `${path}: ${i.message}` })),
    );
  }
};

export interface KeyringEnvironmentOptions {
  /** Where a warning goes (a shared file let through); stderr by default. */
  readonly warn?: (line: string) => void;
}

/** The keyring named by the environment, or undefined (no keyed evidence: today's behaviour). */
export const keyringFromEnvironment = (env: NodeJS.ProcessEnv = process.env, options: KeyringEnvironmentOptions = {}): EvidenceKeyringOptions | undefined => {
  const path = env[KEYRING_FILE_ENV];
  if (path === undefined || path === '') return undefined;
  const allow = env[KEYRING_ALLOW_SHARED_ENV];
  if (allow !== undefined && allow !== '' && allow !== '0' && allow !== '1') throw bad(`must be 1 or 0, not ${JSON.stringify(allow.slice(0, 16))}`, KEYRING_ALLOW_SHARED_ENV);
  const warn = options.warn ?? ((line: string) => void process.stderr.write(`${line}\n`));
  let bytes: Buffer;
  try {
    bytes = readBoundedFile(path, RECORD, KEYRING_FILE_ENV, (fd) => checkPermissions(path, fd, allow === '1', warn));
  } catch (e) {
    if (e instanceof ValidationError && e.reason === 'too_large') throw bad(`${path} is larger than ${MAX_INPUT_BYTES} bytes`, KEYRING_FILE_ENV, 'too_large');
    throw e;
  }
  const parsed = parseKeyringBytes(path, bytes);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw bad(`${path}: expected an object with "active" and "keys"`, '(root)');
  const { active, keys, ...rest } = parsed as Record<string, unknown>;
  const extra = Object.keys(rest);
  if (extra.length > 0) throw bad(`${path}: unknown field(s) ${extra.map((k) => JSON.stringify(k.slice(0, 40))).join(', ')}`, extra[0]!.slice(0, 40), 'unknown_field');
  if (typeof active !== 'string') throw bad(`${path}: "active" must be a key id`, 'active');
  if (typeof keys !== 'object' || keys === null || Array.isArray(keys)) throw bad(`${path}: "keys" must map key ids to base64 key material`, 'keys');
  const issues: ValidationIssue[] = [];
  const all: EvidenceKey[] = [];
  for (const [id, value] of Object.entries(keys as Record<string, unknown>)) {
    const at = `keys.${id.slice(0, 64)}`;
    if (!isKeyId(id)) issues.push(issue(at, `key id ${quoteId(id)} must be 1..64 letters, digits, ".", "_" or "-"`));
    else if (typeof value !== 'string' || value === '' || !BASE64.test(value)) issues.push(issue(at, `key ${quoteId(id)} is not canonical base64`));
    else {
      const secret = Buffer.from(value, 'base64');
      if (secret.byteLength < MIN_KEY_BYTES) issues.push(issue(at, `key ${quoteId(id)} is ${secret.byteLength} byte(s); a key must be at least ${MIN_KEY_BYTES} bytes`));
      else all.push({ id, secret });
    }
  }
  if (issues.length > 0) throw new ValidationError(RECORD, issues);
  const current = all.find((k) => k.id === active);
  if (current === undefined) throw bad(`${path}: the active key ${quoteId(active)} is not among "keys"`, 'active');
  return { active: current, verifyOnly: all.filter((k) => k !== current) };
};
