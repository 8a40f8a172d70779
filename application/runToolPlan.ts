import { createHash } from 'node:crypto';
import { SemanticConflictError, ValidationError, assertMayExecute, invocationPlanDigest, type InvocationPlan, type Ref, type StartBarrierRecord, type StartPlan, type ToolAdapter } from '../domain';
import { canonicalJson } from '../domain/canonical';
import { Identity, TimeoutMs } from '../domain/codecs';
import type { ExecutionPort } from './execution';
import type { RedactionContract } from './invocationPlans';

// What `runTool` derives from a call, for a runtime with no admission or policy system of its
// own: every digest of the start command is a tagged digest of what the call gives (the tool's
// definition, its adapter, the input), so a re-call derives the same command and a changed call
// a different one. Checked before anything is written: a bad call is a typed error, no record,
// no side effect.

/** A tool as runTool runs it: its name (the tool definition's id), its adapter, and what it is. */
export interface Tool {
  /** The tool definition's id, in the id alphabet (A-Z a-z 0-9 . _ -, a letter or digit first, at most 128). */
  readonly name: string;
  readonly adapter: ToolAdapter;
  /** What the tool is (its schema, its version): plain JSON, digested as the tool definition. Default `{ name }`. */
  readonly definition?: unknown;
  /** The barrier's timeout, which the adapter enforces (default 30 s). */
  readonly timeoutMs?: number;
}

export interface RunToolCall {
  /** The Run the call belongs to (created on the first call naming it). */
  readonly runId: string;
  /** This call's id in the Run: its StepRun. The same call id is the same call, never a second one. */
  readonly callId: string;
  readonly tool: Tool;
  /** The tool's input: plain JSON, sealed before the tool runs (at most the plan store's maxPlanBytes). */
  readonly input: unknown;
  /** The Run's project (default `default`). */
  readonly projectId?: string;
}

/** The defaults runTool fills in where an orchestration would bring its own (documented in docs/run-tool.md). */
export const RUN_TOOL_DEFAULTS = {
  projectId: 'default',
  snapshotId: 'snapshot.none',
  timeoutMs: 30_000,
  profile: 'standard',
  policyId: 'policy.none',
  policyVersion: 1,
  redaction: 'redaction.none.v1',
  audit: 'audit.run-tool.v1',
} as const;

/** The redaction contract's id when `redaction.fields` names some input fields (its digest binds which). */
export const REDACTION_ALLOWLIST = 'redaction.allowlist.v1';

const TAG = 'qinglong/run-tool@v1';
const tagged = (kind: string, value: unknown): string =>
  'sha256:' + createHash('sha256').update(TAG).update('\u0000').update(kind).update('\u0000').update(canonicalJson(value), 'utf8').digest('hex');

const RECORD = 'runTool call';
const refuse = (path: string, message: string, reason: 'invalid_value' | 'too_large' = 'invalid_value'): never => {
  throw new ValidationError(RECORD, [{ path, reason, message }]);
};

/** An id of the call: the id alphabet, and how to map one that is not in it. */
const idOf = (path: string, value: unknown): string => {
  if (typeof value !== 'string' || !Identity.is(value)) {
    return refuse(
      path,
      `${path} must be 1..128 characters of A-Z a-z 0-9 . _ - starting with a letter or digit, and look like no URL, path or secret; ` +
        `map any other id onto it, e.g. 'call-' + sha256 hex of it (got ${typeof value === 'string' ? JSON.stringify(value.slice(0, 40)) : typeof value})`,
    );
  }
  return value;
};

/**
 * The `redaction` option (R12.2): the allowlist of input fields the sealed plan's preview shows,
 * every other field never shown. Its shape is checked here (each field a path, named once);
 * that the input holds each field is the plan store's check, the saga's own error. The contract
 * is part of the command: its digest binds the fields as a set, so their order changes nothing.
 */
export const checkedRedaction = (value: unknown): { readonly contract: RedactionContract; readonly ref: Ref } => {
  const bad = (path: string, message: string, reason: 'invalid_value' | 'unknown_field' = 'invalid_value'): never => {
    throw new ValidationError('runTool options', [{ path, reason, message }]);
  };
  const given = value === undefined ? { fields: [] } : value;
  if (typeof given !== 'object' || given === null || Array.isArray(given)) return bad('redaction', "must be { fields: [...] }, the input fields the preview shows, e.g. { fields: ['day'] }");
  const extra = Object.keys(given).find((k) => k !== 'fields');
  if (extra !== undefined) bad(`redaction.${extra}`, 'unknown field (known: fields)', 'unknown_field');
  const fields: unknown = (given as { fields?: unknown }).fields;
  if (!Array.isArray(fields)) return bad('redaction.fields', `must be an array of input field paths (a.b.c), got ${fields === null ? 'null' : typeof fields}`);
  const seen = new Map<string, number>();
  for (let i = 0; i < fields.length; i++) {
    const field: unknown = fields[i];
    if (typeof field !== 'string' || field.length === 0 || field.length > 200) bad(`redaction.fields[${i}]`, 'must be a field path (a.b.c)');
    const first = seen.get(field as string);
    if (first !== undefined) bad(`redaction.fields[${i}]`, `names ${JSON.stringify(field)} again (redaction.fields[${first}]): name each field once`);
    seen.set(field as string, i);
  }
  const contract: RedactionContract = { fields: [...seen.keys()] };
  const id = contract.fields.length === 0 ? RUN_TOOL_DEFAULTS.redaction : REDACTION_ALLOWLIST;
  return { contract, ref: { id, digest: tagged('redaction', { fields: [...contract.fields].sort() }) } };
};

export interface CheckedCall {
  readonly runId: string;
  readonly callId: string;
  readonly adapter: ToolAdapter;
  readonly plan: StartPlan;
  readonly invocation: InvocationPlan;
  readonly redaction: RedactionContract;
}

/** The call checked and its start plan derived, before anything is written (VALIDATION_FAILED, EXECUTION_REFUSED). */
export const checkedCall = (call: RunToolCall, port: ExecutionPort, redactionOption?: unknown): CheckedCall => {
  if (typeof call !== 'object' || call === null) return refuse('', 'runTool takes { runId, callId, tool, input }');
  const runId = idOf('runId', call.runId);
  const callId = idOf('callId', call.callId);
  const projectId = call.projectId === undefined ? RUN_TOOL_DEFAULTS.projectId : idOf('projectId', call.projectId);
  const tool = call.tool as Partial<Tool> | undefined;
  if (typeof tool !== 'object' || tool === null) return refuse('tool', 'a tool is required: { name, adapter, definition?, timeoutMs? }', 'invalid_value');
  const name = idOf('tool.name', tool.name);
  if (typeof tool.adapter !== 'object' || tool.adapter === null) return refuse('tool.adapter', 'the tool has no adapter (processAdapter, httpAdapter, mcpAdapter or your own)', 'invalid_value');
  const adapter = tool.adapter;
  const timeoutMs = tool.timeoutMs ?? RUN_TOOL_DEFAULTS.timeoutMs;
  if (!TimeoutMs.is(timeoutMs)) refuse('tool.timeoutMs', 'must be an integer number of milliseconds in 1..86400000');
  if (!('input' in call)) refuse('input', 'the tool input is required (null for none)', 'invalid_value');
  let definition: string;
  try {
    definition = tagged('tool-definition', tool.definition ?? { name });
  } catch (e) {
    return refuse('tool.definition', `must be plain JSON (${(e as Error).message})`);
  }
  const declared = (adapter as Partial<ToolAdapter>).declaration;
  const adapterRef: Ref = declared?.ref ?? { id: 'adapter.undeclared', digest: tagged('adapter', null) };
  const toolDefinition: Ref = { id: name, digest: definition };
  const invocation: InvocationPlan = { input: call.input };
  const { contract: redaction, ref: redactionRef } = checkedRedaction(redactionOption);
  let planDigest: string;
  try {
    planDigest = invocationPlanDigest(invocation);
  } catch (e) {
    return refuse('input', `the tool input is not plain JSON (${(e as Error).message})`);
  }
  const plan: StartPlan = {
    project: { projectId, snapshotId: RUN_TOOL_DEFAULTS.snapshotId, snapshotDigest: tagged('snapshot', null) },
    toolDefinition,
    handlerBinding: { id: adapterRef.id, digest: tagged('handler-binding', [toolDefinition, adapterRef]) },
    admission: {
      actionDigest: tagged('action', { runId, callId, tool: toolDefinition }),
      planDigest,
      admissionDigest: tagged('admission', 'none'),
      profile: RUN_TOOL_DEFAULTS.profile,
      executionClass: declared?.kind ?? 'process',
      timeoutMs,
      policyFence: { policyId: RUN_TOOL_DEFAULTS.policyId, policyVersion: RUN_TOOL_DEFAULTS.policyVersion, policyDigest: tagged('policy', 'none') },
    },
    contracts: { adapter: adapterRef, redaction: redactionRef, audit: { id: RUN_TOOL_DEFAULTS.audit, digest: tagged('audit', RUN_TOOL_DEFAULTS.audit) } },
  };
  // The adapter meets the contract, and the input fits the plan store (size, key): still nothing written.
  assertMayExecute(true, adapter, plan, invocation);
  port.plans.check(invocation, redaction, redactionRef, planDigest);
  return { runId, callId, adapter, plan, invocation, redaction };
};

/** The fields of this call that differ from what an earlier call with the same ids committed. */
export const differingFields = (plan: StartPlan, committed: Pick<StartBarrierRecord, 'projectId' | 'toolDefinition' | 'handlerBinding' | 'admission' | 'contracts'>): string[] => {
  const fields: string[] = [];
  if (committed.projectId !== plan.project.projectId) fields.push('projectId');
  if (canonicalJson(committed.toolDefinition) !== canonicalJson(plan.toolDefinition)) fields.push('tool.definition');
  if (canonicalJson(committed.contracts.adapter) !== canonicalJson(plan.contracts.adapter)) fields.push('tool.adapter');
  if (committed.admission.timeoutMs !== plan.admission.timeoutMs) fields.push('tool.timeoutMs');
  if (committed.admission.planDigest !== plan.admission.planDigest) fields.push('input');
  if (canonicalJson(committed.contracts.redaction) !== canonicalJson(plan.contracts.redaction)) fields.push('redaction');
  return fields;
};

export const conflictOn = (callId: string, startId: string | undefined, fields: readonly string[]): SemanticConflictError =>
  new SemanticConflictError(
    'startId',
    startId ?? callId,
    startId,
    `call ${callId} was made before with other ${fields.join(', ')}: a call id names one call (use a new call id for a new call)`,
    fields,
  );
