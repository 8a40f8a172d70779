import { ValidationError, type ValidationIssue } from '../domain';

// The plan store's options and its keyring (R12.2), checked before anything is opened: each
// fault is VALIDATION_FAILED naming it, never quoting key bytes. The checked keyring holds its
// own copies of the keys, and lives only in the plan store's closure (invocationPlans.ts).

export interface PlanKey {
  readonly id: string;
  /** 32 bytes (AES-256). Secret. */
  readonly key: Uint8Array;
}

export interface PlanKeyringOptions {
  /** The key id that seals new plans. */
  readonly current: string;
  /** Every key that opens plans: `{ id: bytes }`, or a list of `{ id, key }` (a key id given twice is refused). */
  readonly keys: Readonly<Record<string, Uint8Array>> | readonly PlanKey[];
  /** Key ids destroyed on purpose: their plans read as shredded, never as damage. */
  readonly destroyed?: readonly string[];
}

export interface PlanStoreOptions {
  readonly keyring: PlanKeyringOptions;
  /** Bytes of a tool input's canonical JSON at most (default and ceiling 1 MiB). */
  readonly maxPlanBytes?: number;
}

/** A checked keyring: the current key id, a copy of every key, the destroyed key ids. */
export interface Keyring {
  readonly current: string;
  readonly keys: ReadonlyMap<string, Buffer>;
  readonly destroyed: ReadonlySet<string>;
}

export const PLAN_KEY_BYTES = 32;
export const MAX_PLAN_BYTES = 1024 * 1024;
export const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;

const bad = (path: string, message: string, reason: ValidationIssue['reason'] = 'invalid_value'): never => {
  throw new ValidationError('plans options', [{ path, reason, message }]);
};
export const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The keys as given (a map or a list), each with the option path a fault names. */
const givenKeys = (options: Record<string, unknown>): [string, unknown, string][] => {
  const given: [string, unknown, string][] = Array.isArray(options.keys)
    ? (options.keys as unknown[]).map((k, i) => [isRecord(k) && typeof k.id === 'string' ? k.id : '', isRecord(k) ? k.key : undefined, `plans.keyring.keys[${i}]`])
    : isRecord(options.keys)
      ? Object.entries(options.keys).map(([id, key]) => [id, key, `plans.keyring.keys.${KEY_ID.test(id) ? id : '(malformed id)'}`])
      : bad('plans.keyring.keys', 'must name at least one key: { id: 32 bytes } or [{ id, key }]');
  if (given.length === 0) bad('plans.keyring.keys', 'must name at least one key');
  return given;
};

/** The keyring, checked before anything is opened. */
export const keyringOf = (options: unknown): Keyring => {
  if (!isRecord(options)) return bad('plans.keyring', 'must be { current, keys }');
  const unknown = Object.keys(options).find((k) => !['current', 'keys', 'destroyed'].includes(k));
  if (unknown !== undefined) bad(`plans.keyring.${unknown}`, 'unknown option (known: current, keys, destroyed)', 'unknown_field');
  const keys = new Map<string, Buffer>();
  for (const [id, key, path] of givenKeys(options)) {
    if (!KEY_ID.test(id)) bad(`${path}${Array.isArray(options.keys) ? '.id' : ''}`, 'a plan key id is 1..64 letters, digits, ".", "_" or "-"');
    if (keys.has(id)) bad(`${path}.id`, `key id ${id} is given twice`);
    if (!(key instanceof Uint8Array)) bad(path, `plan key ${id} is missing (give ${PLAN_KEY_BYTES} bytes)`);
    if ((key as Uint8Array).byteLength !== PLAN_KEY_BYTES) bad(path, `plan key ${id} must be ${PLAN_KEY_BYTES} bytes (AES-256), got ${(key as Uint8Array).byteLength}`);
    keys.set(id, Buffer.from(key as Uint8Array)); // a copy: the caller may wipe theirs
  }
  if (typeof options.current !== 'string' || !keys.has(options.current)) bad('plans.keyring.current', 'must name one of the keys');
  const destroyed = new Set<string>();
  if (options.destroyed !== undefined) {
    if (!Array.isArray(options.destroyed)) bad('plans.keyring.destroyed', 'must be a list of key ids');
    for (const [i, id] of (options.destroyed as unknown[]).entries()) {
      if (typeof id !== 'string' || !KEY_ID.test(id)) bad(`plans.keyring.destroyed[${i}]`, 'must be a key id');
      if (keys.has(id as string)) bad(`plans.keyring.destroyed[${i}]`, `key ${id as string} is both destroyed and given`);
      destroyed.add(id as string);
    }
  }
  return { current: options.current as string, keys, destroyed };
};

/** The plan options of an authority's open, checked before anything is opened. */
export const checkedPlanOptions = (options: unknown): PlanStoreOptions | undefined => {
  if (options === undefined) return undefined;
  if (!isRecord(options)) return bad('plans', 'must be { keyring, maxPlanBytes? }');
  const unknown = Object.keys(options).find((k) => !['keyring', 'maxPlanBytes'].includes(k));
  if (unknown !== undefined) bad(`plans.${unknown}`, 'unknown option (known: keyring, maxPlanBytes)', 'unknown_field');
  if (options.keyring === undefined) bad('plans.keyring', 'a plan store needs a keyring: { current, keys }');
  const max = options.maxPlanBytes;
  if (max !== undefined && !(Number.isSafeInteger(max) && (max as number) >= 1 && (max as number) <= MAX_PLAN_BYTES)) bad('plans.maxPlanBytes', `must be an integer in 1..${MAX_PLAN_BYTES}`);
  keyringOf(options.keyring);
  return options as unknown as PlanStoreOptions;
};
