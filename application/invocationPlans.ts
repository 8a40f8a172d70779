import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { canonicalJson } from '../domain/canonical';
import { CorruptRecordError, ExecutionRefusedError, ValidationError, invocationPlanDigest, type InvocationPlan, type Ref, type ValidationIssue } from '../domain';

// Sealed invocation plans (R12.2, the ADR's gate 1). The tool's input is sealed when its start
// is prepared: AES-256-GCM under the keyring's current key, with the start id, the plan digest
// the barrier binds, the key id and the preview's digest as associated data, so a row moved to
// another start, re-keyed or given another preview does not open. Rows live in a side table
// outside the evidence: shredding a plan (or destroying its key) leaves every digest the
// evidence holds intact, so `verify` stays green and counts it as shredded.
//
// The key bytes live only in this closure: never in a row, an error message, a log line, or an
// enumerable property (JSON.stringify and util.inspect of the store see no key).

/** One stored plan, as every backend reads and writes it (`ciphertext` holds the GCM tag at its end). */
export interface InvocationPlanRow {
  readonly start_id: string;
  readonly plan_digest: string;
  /** null once shredded. */
  readonly key_id: string | null;
  readonly nonce: Uint8Array | null;
  readonly ciphertext: Uint8Array | null;
  /** The redacted preview (canonical JSON): the only view of the input operators get. */
  readonly preview_json: string;
}

/** The side table of one backend: insert-or-keep, read, shred, list (for verify). */
export interface PlanRowStore {
  /** Insert the row unless the start has one: the stored row is returned either way. */
  insert(row: InvocationPlanRow): Promise<InvocationPlanRow>;
  get(startId: string): Promise<InvocationPlanRow | null>;
  /** Erase the sealed bytes and key id for good; true if this call shredded it. */
  shred(startId: string): Promise<boolean>;
  all(): Promise<readonly InvocationPlanRow[]>;
}

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

/** Which fields of the tool input a preview shows (dotted paths into objects). Every other field is never shown. */
export interface RedactionContract {
  readonly fields: readonly string[];
}

export interface PlanPreview {
  /** The redaction contract the command names (contracts.redaction). */
  readonly redaction: Ref;
  readonly planDigest: string;
  readonly shown: Readonly<Record<string, unknown>>;
}

export type PlanStatus = { readonly status: 'sealed' | 'shredded'; readonly preview: PlanPreview } | { readonly status: 'absent' };

/** A plan the library opened for one start: the only plan an adapter runs (R12.1). */
export interface OpenedPlan extends InvocationPlan {
  readonly startId: string;
}

export const PLAN_KEY_BYTES = 32;
export const MAX_PLAN_BYTES = 1024 * 1024;
const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;
const AAD_TAG = 'qinglong/invocation-plan-seal@v1';
const PREVIEW_TAG = 'qinglong/invocation-plan-preview@v1';
const RECORD = 'invocation plan';

const refuse = (issues: ValidationIssue[]): never => {
  throw new ValidationError(RECORD, issues);
};
const bad = (path: string, message: string, reason: ValidationIssue['reason'] = 'invalid_value'): never => {
  throw new ValidationError('plans options', [{ path, reason, message }]);
};
const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const aadOf = (startId: string, planDigest: string, keyId: string, previewJson: string): Buffer =>
  Buffer.from(`${AAD_TAG}\n${startId}\n${planDigest}\n${keyId}\n${createHash('sha256').update(PREVIEW_TAG).update('\u0000').update(previewJson, 'utf8').digest('hex')}`, 'utf8');

/** The keyring, checked before anything is opened: each fault is VALIDATION_FAILED naming it, never quoting key bytes. */
const keyringOf = (options: unknown): { current: string; keys: Map<string, Buffer>; destroyed: Set<string> } => {
  if (!isRecord(options)) return bad('plans.keyring', 'must be { current, keys }');
  const unknown = Object.keys(options).find((k) => !['current', 'keys', 'destroyed'].includes(k));
  if (unknown !== undefined) bad(`plans.keyring.${unknown}`, 'unknown option (known: current, keys, destroyed)', 'unknown_field');
  const keys = new Map<string, Buffer>();
  const given: [string, unknown, string][] = Array.isArray(options.keys)
    ? (options.keys as unknown[]).map((k, i) => [isRecord(k) && typeof k.id === 'string' ? k.id : '', isRecord(k) ? k.key : undefined, `plans.keyring.keys[${i}]`])
    : isRecord(options.keys)
      ? Object.entries(options.keys).map(([id, key]) => [id, key, `plans.keyring.keys.${KEY_ID.test(id) ? id : '(malformed id)'}`])
      : bad('plans.keyring.keys', 'must name at least one key: { id: 32 bytes } or [{ id, key }]');
  if (given.length === 0) bad('plans.keyring.keys', 'must name at least one key');
  for (const [id, key, path] of given) {
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

/** The preview a redaction contract allows: only the named fields, each of which the input must hold. */
export const previewOf = (input: unknown, contract: RedactionContract, redaction: Ref, planDigest: string): PlanPreview => {
  if (!isRecord(contract) || !Array.isArray(contract.fields)) return refuse([{ path: 'redaction', reason: 'invalid_value', message: 'must be { fields: [...] }' }]);
  const extra = Object.keys(contract).find((k) => k !== 'fields');
  if (extra !== undefined) refuse([{ path: `redaction.${extra}`, reason: 'unknown_field', message: 'unknown field (known: fields)' }]);
  const shown: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const [i, field] of contract.fields.entries()) {
    if (typeof field !== 'string' || field.length === 0 || field.length > 200) refuse([{ path: `redaction.fields[${i}]`, reason: 'invalid_value', message: 'must be a field path (a.b.c)' }]);
    let at: unknown = input;
    for (const part of field.split('.')) {
      if (!isRecord(at) || !Object.prototype.hasOwnProperty.call(at, part)) {
        return refuse([{ path: `redaction.fields[${i}]`, reason: 'invalid_value', message: `names ${JSON.stringify(field)}, which is not a field of the tool input` }]);
      }
      at = at[part];
    }
    shown[field] = at;
  }
  return { redaction, planDigest, shown: { ...shown } };
};

const opened = new WeakMap<object, { readonly startId: string; readonly planDigest: string }>();
/** The start a plan was opened for by this library, or undefined for any other value. */
export const openedPlanOf = (plan: unknown): { readonly startId: string; readonly planDigest: string } | undefined =>
  typeof plan === 'object' && plan !== null ? opened.get(plan) : undefined;

export interface InvocationPlans {
  /** Whether a key is configured (the execution gate, R12.4). */
  readonly keyed: boolean;
  /** The checks of `seal` that need no store (size, redaction contract, key): a typed error, nothing written. */
  check(plan: InvocationPlan, contract: RedactionContract, redaction: Ref, planDigest: string): string;
  /** The sealed row of a tool input for a start, stored by nothing yet: the start writes it in its own transaction. */
  sealRow(startId: string, planDigest: string, redaction: Ref, plan: InvocationPlan, contract: RedactionContract): InvocationPlanRow;
  /** Seal a tool input for a start already committed without one (insert-or-keep: a replay finds the plan it sealed). */
  seal(startId: string, planDigest: string, redaction: Ref, plan: InvocationPlan, contract: RedactionContract): Promise<PlanStatus>;
  /** Open the start's plan for its barrier's plan digest; fails closed on any change. */
  open(startId: string, planDigest: string): Promise<OpenedPlan>;
  /** What operators see: the preview and whether the plan is sealed or shredded. */
  status(startId: string): Promise<PlanStatus>;
  shred(startId: string): Promise<boolean>;
  /** For verify: counts, and every row that does not open as what it claims (with a key). */
  audit(planDigestOf: (startId: string) => Promise<string | undefined>): Promise<{ sealed: number; shredded: number; problems: { record: string; problem: string }[] }>;
}

const statusOf = (row: InvocationPlanRow | null, destroyed: ReadonlySet<string>): PlanStatus => {
  if (row === null) return { status: 'absent' };
  let preview: PlanPreview;
  try {
    preview = JSON.parse(row.preview_json) as PlanPreview;
  } catch {
    throw new CorruptRecordError('invocation plan', row.start_id, 'its preview is not JSON');
  }
  const shredded = row.ciphertext === null || row.key_id === null || destroyed.has(row.key_id);
  return { status: shredded ? 'shredded' : 'sealed', preview };
};

export const createInvocationPlans = (options: PlanStoreOptions | undefined, store: PlanRowStore): InvocationPlans => {
  const ring = options === undefined ? undefined : keyringOf(options.keyring);
  const maxBytes = options?.maxPlanBytes ?? MAX_PLAN_BYTES;
  const destroyed: ReadonlySet<string> = ring?.destroyed ?? new Set();

  /** The plan's input, or the reason it does not open (never a key byte in the text). */
  const decrypt = (row: InvocationPlanRow, planDigest: string): { input: unknown } | { shredded: string } | { corrupt: string } => {
    if (row.ciphertext === null || row.key_id === null || row.nonce === null) return { shredded: 'the plan was shredded' };
    if (destroyed.has(row.key_id)) return { shredded: `its key ${row.key_id} was destroyed` };
    const key = ring?.keys.get(row.key_id);
    if (key === undefined) return ring === undefined ? { shredded: 'no plan key is configured' } : { corrupt: `sealed under key id ${KEY_ID.test(row.key_id) ? row.key_id : '(malformed)'}, which the keyring does not hold` };
    if (row.plan_digest !== planDigest) return { corrupt: 'its plan digest is not the one the barrier binds' };
    const bytes = Buffer.from(row.ciphertext);
    if (row.nonce.byteLength !== 12 || bytes.byteLength < 16) return { corrupt: 'its sealed bytes are malformed' };
    let text: string;
    try {
      const d = createDecipheriv('aes-256-gcm', key, Buffer.from(row.nonce));
      d.setAAD(aadOf(row.start_id, row.plan_digest, row.key_id, row.preview_json));
      d.setAuthTag(bytes.subarray(bytes.byteLength - 16));
      text = Buffer.concat([d.update(bytes.subarray(0, bytes.byteLength - 16)), d.final()]).toString('utf8');
    } catch {
      return { corrupt: 'it does not open under its key and binding (bytes, key id, start, digest or preview changed)' };
    }
    const input: unknown = JSON.parse(text);
    if (invocationPlanDigest({ input }) !== planDigest) return { corrupt: 'it opens to an input the barrier does not bind' };
    return { input };
  };

  /** Returns the preview's canonical JSON. */
  const check = (plan: InvocationPlan, contract: RedactionContract, redaction: Ref, planDigest: string): string => {
    if (ring === undefined) throw new ExecutionRefusedError('gate_missing', 'gate plans.keyring: no plan key is configured to seal the tool input');
    let json: string;
    try {
      json = canonicalJson(plan.input);
    } catch (e) {
      return refuse([{ path: 'input', reason: 'invalid_value', message: `the tool input is not plain JSON (${(e as Error).message})` }]);
    }
    const size = Buffer.byteLength(json, 'utf8');
    if (size > maxBytes) refuse([{ path: 'input', reason: 'too_large', message: `the tool input is ${size} bytes, over the ${maxBytes}-byte plan limit` }]);
    if (invocationPlanDigest(plan) !== planDigest) throw new ExecutionRefusedError('plan_mismatch', 'the invocation plan is not the one admission digested (admission.planDigest)');
    return canonicalJson(previewOf(plan.input, contract, redaction, planDigest));
  };

  const sealRow = (startId: string, planDigest: string, redaction: Ref, plan: InvocationPlan, contract: RedactionContract): InvocationPlanRow => {
    const preview = check(plan, contract, redaction, planDigest);
    if (ring === undefined) throw new Error('unreachable: check refuses without a key');
    const json = canonicalJson(plan.input);
    const nonce = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', ring.keys.get(ring.current)!, nonce);
    c.setAAD(aadOf(startId, planDigest, ring.current, preview));
    const ciphertext = Buffer.concat([c.update(json, 'utf8'), c.final(), c.getAuthTag()]);
    return { start_id: startId, plan_digest: planDigest, key_id: ring.current, nonce, ciphertext, preview_json: preview };
  };

  return {
    keyed: ring !== undefined,
    check,
    sealRow,
    seal: async (startId, planDigest, redaction, plan, contract) => statusOf(await store.insert(sealRow(startId, planDigest, redaction, plan, contract)), destroyed),
    open: async (startId, planDigest) => {
      const row = await store.get(startId);
      if (row === null) throw new ExecutionRefusedError('plan_unavailable', `no sealed invocation plan for start ${startId}`);
      const r = decrypt(row, planDigest);
      if ('shredded' in r) throw new ExecutionRefusedError('plan_unavailable', `the invocation plan of start ${startId} is unreadable: ${r.shredded}`);
      if ('corrupt' in r) throw new CorruptRecordError('invocation plan', startId, r.corrupt);
      const plan: OpenedPlan = Object.freeze({ startId, input: r.input });
      opened.set(plan, { startId, planDigest });
      return plan;
    },
    status: async (startId) => statusOf(await store.get(startId), destroyed),
    shred: (startId) => store.shred(startId),
    audit: async (planDigestOf) => {
      let sealed = 0;
      let shredded = 0;
      const problems: { record: string; problem: string }[] = [];
      for (const row of await store.all()) {
        const bound = await planDigestOf(row.start_id);
        if (bound === undefined) {
          problems.push({ record: row.start_id, problem: 'an invocation plan for a start no barrier commits' });
          continue;
        }
        if (row.plan_digest !== bound) {
          problems.push({ record: row.start_id, problem: 'the invocation plan names a plan digest its barrier does not bind' });
          continue;
        }
        let status: PlanStatus;
        try {
          status = statusOf(row, destroyed);
        } catch (e) {
          problems.push({ record: row.start_id, problem: (e as Error).message });
          continue;
        }
        if (status.status === 'absent' || status.preview?.planDigest !== bound) {
          problems.push({ record: row.start_id, problem: 'its preview names another plan digest' });
          continue;
        }
        if (status.status === 'shredded' || ring === undefined) {
          if (status.status === 'shredded') shredded++;
          else sealed++;
          continue;
        }
        const r = decrypt(row, bound);
        if ('corrupt' in r) problems.push({ record: row.start_id, problem: `the invocation plan does not open: ${r.corrupt}` });
        else if ('shredded' in r) shredded++;
        else sealed++;
      }
      return { sealed, shredded, problems };
    },
  };
};

/** The operator's side (status, shred) of a plan store, each start id checked first. */
export const plansApiOf = (plans: () => InvocationPlans, startIdOf: (startId: string) => string): { status(startId: string): Promise<PlanStatus>; shred(startId: string): Promise<boolean> } => ({
  status: async (startId) => plans().status(startIdOf(startId)),
  shred: async (startId) => plans().shred(startIdOf(startId)),
});
