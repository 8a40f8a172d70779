import { canonicalJson } from '../domain/canonical';
import { CorruptRecordError, ExecutionRefusedError, ValidationError, invocationPlanDigest, type InvocationPlan, type Ref, type ValidationIssue } from '../domain';
import { MAX_PLAN_BYTES, isRecord, keyringOf, type PlanStoreOptions } from './planKeys';
import { openedInput, sealedRow, type InvocationPlanRow } from './planSeal';

export { MAX_PLAN_BYTES, PLAN_KEY_BYTES, checkedPlanOptions, type PlanKey, type PlanKeyringOptions, type PlanStoreOptions } from './planKeys';
export type { InvocationPlanRow } from './planSeal';

// Sealed invocation plans (R12.2, the ADR's gate 1). The tool's input is sealed when its start
// is prepared (planSeal.ts) under the keyring's current key (planKeys.ts). Rows live in a side
// table outside the evidence: shredding a plan (or destroying its key) leaves every digest the
// evidence holds intact, so `verify` stays green and counts it as shredded.
//
// The key bytes live only in this closure: never in a row, an error message, a log line, or an
// enumerable property (JSON.stringify and util.inspect of the store see no key).

/** The side table of one backend: insert-or-keep, read, shred, list (for verify). */
export interface PlanRowStore {
  /** Insert the row unless the start has one: the stored row is returned either way. */
  insert(row: InvocationPlanRow): Promise<InvocationPlanRow>;
  get(startId: string): Promise<InvocationPlanRow | null>;
  /** Erase the sealed bytes and key id for good; true if this call shredded it. */
  shred(startId: string): Promise<boolean>;
  all(): Promise<readonly InvocationPlanRow[]>;
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

const RECORD = 'invocation plan';

const refuse = (issues: ValidationIssue[]): never => {
  throw new ValidationError(RECORD, issues);
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
  audit(planDigestOf: (startId: string) => Promise<string | undefined>): Promise<PlanAudit>;
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

/** What verify learns of the stored plans. */
export type PlanAudit = { sealed: number; shredded: number; problems: { record: string; problem: string }[] };

/** What verify sees of the stored plans: counts, and every row that does not open as what it claims (when keyed). */
const auditRows = async (
  rows: readonly InvocationPlanRow[],
  planDigestOf: (startId: string) => Promise<string | undefined>,
  destroyed: ReadonlySet<string>,
  decrypt: ((row: InvocationPlanRow, planDigest: string) => ReturnType<typeof openedInput>) | undefined,
): Promise<PlanAudit> => {
  let sealed = 0;
  let shredded = 0;
  const problems: { record: string; problem: string }[] = [];
  for (const row of rows) {
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
    if (status.status === 'shredded' || decrypt === undefined) {
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
};

export const createInvocationPlans = (options: PlanStoreOptions | undefined, store: PlanRowStore): InvocationPlans => {
  const ring = options === undefined ? undefined : keyringOf(options.keyring);
  const maxBytes = options?.maxPlanBytes ?? MAX_PLAN_BYTES;
  const destroyed: ReadonlySet<string> = ring?.destroyed ?? new Set();

  const decrypt = (row: InvocationPlanRow, planDigest: string) => openedInput(ring, destroyed, row, planDigest);

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
    return sealedRow(ring, startId, planDigest, canonicalJson(plan.input), preview);
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
    audit: async (planDigestOf) => auditRows(await store.all(), planDigestOf, destroyed, ring === undefined ? undefined : decrypt),
  };
};

/** The operator's side (status, shred) of a plan store, each start id checked first. */
export const plansApiOf = (plans: () => InvocationPlans, startIdOf: (startId: string) => string): { status(startId: string): Promise<PlanStatus>; shred(startId: string): Promise<boolean> } => ({
  status: async (startId) => plans().status(startIdOf(startId)),
  shred: async (startId) => plans().shred(startIdOf(startId)),
});
