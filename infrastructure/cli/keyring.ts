import { readFileSync } from 'node:fs';
import { ValidationError } from '../../domain';
import type { EvidenceKey, EvidenceKeyringOptions } from '../../application/evidenceKeys';

// The CLI's deployment keyring (R9.4) comes from a key file named by an environment variable,
// never from a command-line value (which would land in shell history, `ps` and logs):
//
//   QINGLONG_BARRIER_KEYRING_FILE=/etc/qinglong/barrier-keys.json
//   { "active": "k2", "keys": { "k1": "<base64 of >= 32 bytes>", "k2": "<base64>" } }
//
// `active` seals new starts; every other key is verify-only (kept after a rotation). Messages
// name the file, a field or a key id, never a key's value.

export const KEYRING_FILE_ENV = 'QINGLONG_BARRIER_KEYRING_FILE';

const bad = (message: string) => new ValidationError('keyring file', [{ path: KEYRING_FILE_ENV, reason: 'invalid_value', message }]);

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** The keyring named by the environment, or undefined (no keyed evidence: today's behaviour). */
export const keyringFromEnvironment = (env: NodeJS.ProcessEnv = process.env): EvidenceKeyringOptions | undefined => {
  const path = env[KEYRING_FILE_ENV];
  if (path === undefined || path === '') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    // the parser's message may quote the file's text: report only that it failed
    throw bad(`cannot read ${path} as JSON (${(e as NodeJS.ErrnoException).code ?? 'invalid JSON'})`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw bad(`${path}: expected an object with "active" and "keys"`);
  const { active, keys, ...rest } = parsed as Record<string, unknown>;
  if (Object.keys(rest).length > 0) throw bad(`${path}: unknown field(s) ${Object.keys(rest).map((k) => JSON.stringify(k.slice(0, 40))).join(', ')}`);
  if (typeof active !== 'string') throw bad(`${path}: "active" must be a key id`);
  if (typeof keys !== 'object' || keys === null || Array.isArray(keys)) throw bad(`${path}: "keys" must map key ids to base64 key material`);
  const all: EvidenceKey[] = Object.entries(keys as Record<string, unknown>).map(([id, value]) => {
    if (typeof value !== 'string' || !BASE64.test(value)) throw bad(`${path}: key ${JSON.stringify(id.slice(0, 64))} is not base64`);
    return { id, secret: Buffer.from(value, 'base64') };
  });
  const current = all.find((k) => k.id === active);
  if (current === undefined) throw bad(`${path}: the active key ${JSON.stringify(active.slice(0, 64))} is not among "keys"`);
  return { active: current, verifyOnly: all.filter((k) => k !== current) };
};
