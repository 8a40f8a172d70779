import { PLAN_KEY_BYTES, type PlanStoreOptions } from '../../application/invocationPlans';
import { isKeyId } from '../../application/evidenceKeys';
import { decodeKeys, keyFileError, quoteId, readKeyFile, type KeyFile, type KeyringEnvironmentOptions } from './keyring';

// The CLI's plan keyring (R12.2): the keys that open sealed invocation plans, from a key file
// named by `--plan-keyring FILE` or QINGLONG_BARRIER_PLAN_KEYRING_FILE (the option wins), read
// exactly as strictly as the evidence key file (keyring.ts: bounded at 1 MiB, strict JSON, a
// key id given twice refused, owner-only unless QINGLONG_BARRIER_KEYRING_ALLOW_SHARED=1):
//
//   { "active": "k2", "keys": { "k1": "<base64 of 32 bytes>", "k2": "<base64>" }, "destroyed": ["k0"] }
//
// With it, `show`, `inspect` and `in-doubt` open each sealed plan they report to prove it is the
// one its barrier binds (its input is dropped unread: only the redacted preview is printed), a
// destroyed key's plans read as shredded, and `verify` opens every plan. Without it they print
// what the plan row says. A key is exactly 32 bytes (AES-256); no message quotes one.

export const PLAN_KEYRING_FILE_ENV = 'QINGLONG_BARRIER_PLAN_KEYRING_FILE';
export const PLAN_KEYRING_OPTION = '--plan-keyring';

/** The plan keyring the option or the environment names, or undefined (plans are shown as stored, unopened). */
export const planKeyringFrom = (option: string | undefined, env: NodeJS.ProcessEnv = process.env, options: KeyringEnvironmentOptions = {}): PlanStoreOptions | undefined => {
  const fromEnv = env[PLAN_KEYRING_FILE_ENV];
  const path = option ?? (fromEnv === '' ? undefined : fromEnv);
  if (path === undefined) return undefined;
  const file: KeyFile = { path, namedBy: option === undefined ? PLAN_KEYRING_FILE_ENV : PLAN_KEYRING_OPTION, record: 'plan keyring file' };
  if (path === '') throw keyFileError(file, 'must name a key file');
  const { active, keys, destroyed } = readKeyFile(file, env, options, ['active', 'keys', 'destroyed']);
  const all = decodeKeys(file, keys, (id, n) => (n === PLAN_KEY_BYTES ? undefined : `key ${quoteId(id)} is ${n} byte(s); a plan key is exactly ${PLAN_KEY_BYTES} bytes (AES-256)`));
  if (!all.some((k) => k.id === active)) throw keyFileError(file, `${path}: the active key ${quoteId(active)} is not among "keys"`, 'active');
  const gone: string[] = [];
  if (destroyed !== undefined) {
    if (!Array.isArray(destroyed)) throw keyFileError(file, `${path}: "destroyed" must be a list of key ids`, 'destroyed');
    for (const [i, id] of (destroyed as unknown[]).entries()) {
      if (typeof id !== 'string' || !isKeyId(id)) throw keyFileError(file, `${path}: "destroyed"[${i}] must be a key id`, `destroyed[${i}]`);
      if (all.some((k) => k.id === id)) throw keyFileError(file, `${path}: key ${quoteId(id)} is both destroyed and in "keys"`, `destroyed[${i}]`);
      if (gone.includes(id)) throw keyFileError(file, `${path}: key ${quoteId(id)} is destroyed twice`, `destroyed[${i}]`);
      gone.push(id);
    }
  }
  return {
    keyring: {
      current: active,
      keys: all.map((k) => ({ id: k.id, key: k.secret })),
      ...(gone.length === 0 ? {} : { destroyed: gone }),
    },
  };
};
