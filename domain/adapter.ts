import { createHash } from 'node:crypto';
import * as t from 'io-ts';
import type { StartBarrierRecord } from './barrier';
import { canonicalJson } from './canonical';
import { Digest, decodeOrThrow, integer, oneOf, strictObject, type Ref } from './codecs';
import { EXECUTION_CLASSES, type ExecutionClass } from './command';
import { ExecutionRefusedError } from './errors';
import type { OutcomeReasonCode } from './resolution';

// The adapter contract (R11.1): what a tool adapter declares, what `start` and `inspect`
// answer, and the one pure rule that decides, for a claimed attempt, whether the saga may
// invoke, must inspect first, or must leave the attempt to manual recovery (R11.2). Nothing
// here does I/O. Nothing of the tool's input or output is ever part of a report that reaches
// a durable record: a report carries closed codes, digests and sizes only.

export const ADAPTER_KINDS = EXECUTION_CLASSES;
export type AdapterKind = ExecutionClass;

/** What `inspect(startId)` can say after a crash or a lost response. */
export const INSPECT_STATES = ['not_started', 'running', 'succeeded', 'failed', 'unknown'] as const;
export type InspectState = (typeof INSPECT_STATES)[number];

/**
 * Closed codes for why a start ended as it did. They are the only "reason" an adapter outcome
 * fact carries (no free text: R10.2); each is an OutcomeReasonCode an operator may also use.
 */
export const ADAPTER_RESULT_CODES = [
  'tool_succeeded',
  'tool_failed',
  'tool_timed_out',
  'tool_killed',
  'inspected_succeeded',
  'inspected_failed',
] as const satisfies readonly OutcomeReasonCode[];
export type AdapterResultCode = (typeof ADAPTER_RESULT_CODES)[number];

/** What an adapter guarantees. The saga reads only these, never the adapter's kind, to decide. */
export interface AdapterGuarantees {
  /** A second `start` with the same startId never repeats the side effect (the tool dedupes on it). */
  readonly idempotentStart: boolean;
  /** `start` gives up (and the tool is stopped where the transport allows) within the barrier's timeout. */
  readonly enforcesTimeout: boolean;
}

export interface AdapterDeclaration {
  readonly kind: AdapterKind;
  /** The reviewed adapter (R1.4.3): the barrier must name exactly this identity and digest. */
  readonly ref: Ref;
  readonly guarantees: AdapterGuarantees;
  /**
   * The identity of the durable journal the adapter records its starts in, when it keeps one
   * (the process adapter). A driver names it in its claim, so that `inspect` can prove "never
   * started" only against a journal every earlier driver of the attempt wrote to first.
   */
  readonly journalId?: string;
}

/** What `start` receives besides the tool input: the committed barrier, never more. */
export interface AdapterStartContext {
  readonly barrier: StartBarrierRecord;
  readonly barrierDigest: string;
  readonly committedAtMs: number;
  /** The barrier's timeout (admission), the bound the adapter must enforce. */
  readonly timeoutMs: number;
}

/**
 * What an adapter acts on (R12.1): minted by the library from a verified read of a committed
 * barrier, by an execution authority, for one start, one attempt and one adapter, and good only
 * while that authority is open. Its shape can be copied; a copy is not a ticket (the library
 * knows the ones it minted), so an adapter refuses it before any I/O.
 */
export interface ExecutionTicket extends AdapterStartContext {
  readonly startId: string;
  /** The attempt: the StepRun version the start moved it to. */
  readonly attempt: number;
  /** The reviewed adapter the barrier names: only that adapter accepts the ticket. */
  readonly adapter: Ref;
  /** `execute`: start and inspect; `inspect`: inspect only (an operator's read). */
  readonly use: 'execute' | 'inspect';
}

/**
 * The tool input. An adapter runs only a plan the library opened from the sealed invocation
 * plan of the ticket's start (R12.2); the admission's `planDigest` binds it, so the adapter
 * runs exactly what was admitted.
 */
export interface InvocationPlan {
  readonly input: unknown;
}

/** What `start` reports when it knows the outcome. Throwing means the outcome is unknown. */
export const AdapterReport = strictObject('AdapterReport', {
  outcome: oneOf(['completed', 'failed'] as const),
  code: oneOf(ADAPTER_RESULT_CODES),
  outputDigest: Digest,
  outputBytes: integer('OutputBytes', 0, Number.MAX_SAFE_INTEGER),
});
export type AdapterReport = t.TypeOf<typeof AdapterReport>;
export const decodeAdapterReport = (input: unknown): AdapterReport => decodeOrThrow(AdapterReport, 'adapter report', input);

/**
 * What the tool gave back, for the caller only: it never reaches a record (the evidence keeps
 * the output's digest and size). Bounded: `text` holds at most RETURNED_OUTPUT_BYTES of the
 * output as UTF-8, `stderr` (processes) at most RETURNED_STDERR_BYTES.
 */
export interface ToolOutput {
  /** stdout of a process, the body of an HTTP response, an MCP tool's result as JSON. */
  readonly text: string;
  /** Bytes the tool produced (what the outcome fact's outputBytes says). */
  readonly bytes: number;
  /** `text` is only the first RETURNED_OUTPUT_BYTES. */
  readonly truncated: boolean;
  readonly stderr?: string;
  readonly stderrTruncated?: boolean;
}
export const RETURNED_OUTPUT_BYTES = 1024 * 1024;
export const RETURNED_STDERR_BYTES = 64 * 1024;

/** A report with the output it came with: the saga records the report and hands `output` back. */
export type AdapterAnswer = AdapterReport & { readonly output?: ToolOutput };

/** The first `max` bytes of a tool's output as text, and whether that is all of it. */
export const boundedText = (bytes: Uint8Array, max: number): { text: string; truncated: boolean } => ({
  text: Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.byteLength, max)).toString('utf8'),
  truncated: bytes.byteLength > max,
});

/** An output an adapter returned, if it is one (anything else is dropped: it is the caller's, never evidence). */
export const toolOutputOf = (value: unknown): ToolOutput | undefined => {
  if (typeof value !== 'object' || value === null) return undefined;
  const o = value as Partial<Record<keyof ToolOutput, unknown>>;
  if (typeof o.text !== 'string' || !Number.isSafeInteger(o.bytes) || typeof o.truncated !== 'boolean') return undefined;
  if (o.stderr !== undefined && typeof o.stderr !== 'string') return undefined;
  return {
    text: o.text,
    bytes: o.bytes as number,
    truncated: o.truncated,
    ...(o.stderr === undefined ? {} : { stderr: o.stderr as string, stderrTruncated: o.stderrTruncated === true }),
  };
};

/** Split an adapter's answer into the report (decoded strictly, for the record) and the output (for the caller). */
export const splitAnswer = (answer: unknown): { report: unknown; output?: ToolOutput } => {
  if (typeof answer !== 'object' || answer === null || !('output' in answer)) return { report: answer };
  const { output, ...report } = answer as { output: unknown };
  const kept = toolOutputOf(output);
  return kept === undefined ? { report } : { report, output: kept };
};

export const InspectReport = strictObject('InspectReport', { state: oneOf(INSPECT_STATES) }, { outputDigest: Digest, outputBytes: integer('OutputBytes', 0, Number.MAX_SAFE_INTEGER) });
export type InspectReport = t.TypeOf<typeof InspectReport>;
export const decodeInspectReport = (input: unknown): InspectReport => decodeOrThrow(InspectReport, 'inspect report', input);
/** What inspect may hand back of a finished tool's output (a status endpoint that keeps it). */
export type InspectAnswer = InspectReport & { readonly output?: ToolOutput };

/**
 * How an adapter's tool invocation appears in a trace, by the OpenTelemetry semantic conventions
 * of its protocol (HTTP: `POST` with `http.request.method`, `url.full`, `server.address`; MCP:
 * `tools/call <tool>` with the `mcp.*`, `rpc.*` and `gen_ai.tool.name` attributes). Configuration
 * only (never the tool input or a credential).
 */
export interface ToolCallTelemetry {
  readonly spanName: string;
  /** `client` for a call to another service (HTTP, MCP); `internal` for work in this host. */
  readonly kind: 'client' | 'internal';
  readonly attributes: Readonly<Record<string, string | number | boolean>>;
}

export interface ToolAdapter {
  readonly declaration: AdapterDeclaration;
  /** How its invocation appears in a trace (optional: an INTERNAL span otherwise). */
  readonly telemetry?: ToolCallTelemetry;
  /** Start the side effect for a committed barrier, keyed by `barrier.startId` (R11.1); only on a minted ticket and its opened plan (R12.1). */
  start(ticket: ExecutionTicket, plan: InvocationPlan): Promise<AdapterReport | AdapterAnswer>;
  /**
   * What the tool's side knows of the ticket's start, after a crash or a lost response.
   * `attempt` is what the store knows of it: without it an adapter whose answer depends on the
   * claims (a journal) cannot prove `not_started` and says `unknown`.
   */
  inspect?(ticket: ExecutionTicket, attempt?: InspectAttempt): Promise<InspectReport | InspectAnswer>;
}

/** The attempt as the store records it: every driver claim taken on the start so far, oldest first. */
export interface InspectAttempt {
  readonly claims: readonly Pick<DriverClaim, 'driverId' | 'generation'>[];
}

const PLAN_TAG = 'qinglong/tool-invocation-plan@v1';
const OUTPUT_TAG = 'qinglong/tool-output@v1';

/** The digest admission puts in `admission.planDigest` for an invocation plan. */
export const invocationPlanDigest = (plan: InvocationPlan): string =>
  'sha256:' + createHash('sha256').update(PLAN_TAG, 'utf8').update('\u0000').update(canonicalJson(plan.input), 'utf8').digest('hex');

/** Digest and size of a tool's raw output: all that may be kept of it. */
export const outputDigestOf = (output: Uint8Array | string): { outputDigest: string; outputBytes: number } => {
  const bytes = typeof output === 'string' ? Buffer.from(output, 'utf8') : output;
  return { outputDigest: 'sha256:' + createHash('sha256').update(OUTPUT_TAG, 'utf8').update('\u0000').update(bytes).digest('hex'), outputBytes: bytes.byteLength };
};

// --- the gate (R11.3) ---

/** Refuse unless execution was enabled explicitly and the adapter meets the contract for this barrier. */
export const assertMayExecute = (enabled: unknown, adapter: unknown, barrier: Pick<StartBarrierRecord, 'admission' | 'contracts'>, plan: InvocationPlan): ToolAdapter => {
  if (enabled !== true) throw new ExecutionRefusedError('execution_disabled', 'execution was not enabled explicitly for this authority');
  const a = adapter as Partial<ToolAdapter> | null;
  const d = a?.declaration;
  if (a === null || typeof a !== 'object' || typeof a.start !== 'function' || d === undefined) {
    throw new ExecutionRefusedError('adapter_contract_unmet', 'the adapter declares no contract (declaration and start are required)');
  }
  if (!(ADAPTER_KINDS as readonly string[]).includes(d.kind) || typeof d.guarantees?.idempotentStart !== 'boolean' || typeof d.guarantees?.enforcesTimeout !== 'boolean') {
    throw new ExecutionRefusedError('adapter_contract_unmet', 'the adapter declaration is malformed');
  }
  if (a.inspect !== undefined && typeof a.inspect !== 'function') throw new ExecutionRefusedError('adapter_contract_unmet', 'inspect must be a function when present');
  if (!d.guarantees.enforcesTimeout) throw new ExecutionRefusedError('adapter_contract_unmet', 'the adapter does not enforce the barrier timeout');
  if (d.kind !== barrier.admission.executionClass) {
    throw new ExecutionRefusedError('adapter_mismatch', `the barrier admits execution class ${barrier.admission.executionClass}, the adapter is ${d.kind}`);
  }
  if (d.ref?.id !== barrier.contracts.adapter.id || d.ref?.digest !== barrier.contracts.adapter.digest) {
    throw new ExecutionRefusedError('adapter_mismatch', `the barrier names reviewed adapter ${barrier.contracts.adapter.id}, not this one`);
  }
  if (invocationPlanDigest(plan) !== barrier.admission.planDigest) {
    throw new ExecutionRefusedError('plan_mismatch', 'the invocation plan is not the one admission digested (admission.planDigest)');
  }
  return a as ToolAdapter;
};

// --- one driver per attempt, and what it may do (R11.2) ---

/** The claim a driver holds on one attempt: `generation` 1 is the first driver ever. */
export interface DriverClaim {
  readonly startId: string;
  readonly driverId: string;
  readonly generation: number;
  readonly leaseUntilMs: number;
}

export type ClaimResult =
  | { readonly status: 'claimed'; readonly claim: DriverClaim }
  /** Another driver holds a live lease: this one must not invoke. */
  | { readonly status: 'held'; readonly holder: DriverClaim };

/** The port the saga claims attempts through (a lease recorded in the store, R11.2). */
export interface DriverClaims {
  /** Take the next generation of `startId`, unless a live lease is held by another driver. */
  claim(startId: string, driverId: string, leaseMs: number): Promise<ClaimResult>;
  /** End this driver's generation (it is done with the attempt, or handed it to recovery). */
  release(claim: DriverClaim): Promise<void>;
  /** Every claim ever taken on the start, oldest first (for operators and evidence). */
  history(startId: string): Promise<readonly (DriverClaim & { readonly released: boolean })[]>;
  close(): Promise<void>;
}

export type DriverStep =
  | { readonly kind: 'invoke' }
  | { readonly kind: 'inspect' }
  /** At-most-once: an earlier driver may have invoked and nothing can tell; manual recovery. */
  | { readonly kind: 'in_doubt'; readonly why: 'no_inspect' | 'inspect_unknown' | 'inspect_running' };

/**
 * The first step of a driver that holds the claim. Generation 1 means no driver ever held the
 * attempt, so no invocation can have happened. A later generation means one may have: inspect
 * when the adapter can, invoke again only when starts are idempotent, otherwise stop.
 */
export const firstStep = (claim: DriverClaim, adapter: Pick<ToolAdapter, 'declaration' | 'inspect'>): DriverStep => {
  if (claim.generation === 1) return { kind: 'invoke' };
  if (adapter.inspect !== undefined) return { kind: 'inspect' };
  return adapter.declaration.guarantees.idempotentStart ? { kind: 'invoke' } : { kind: 'in_doubt', why: 'no_inspect' };
};

/** After inspecting: record what the tool's side knows, invoke when it never started, or stop. */
export const stepAfterInspect = (
  state: InspectState,
  guarantees: AdapterGuarantees,
): { readonly kind: 'record'; readonly outcome: 'completed' | 'failed'; readonly code: AdapterResultCode } | { readonly kind: 'invoke' } | DriverStep => {
  switch (state) {
    case 'succeeded':
      return { kind: 'record', outcome: 'completed', code: 'inspected_succeeded' };
    case 'failed':
      return { kind: 'record', outcome: 'failed', code: 'inspected_failed' };
    case 'not_started':
      return { kind: 'invoke' };
    case 'running':
      return { kind: 'in_doubt', why: 'inspect_running' };
    case 'unknown':
      return guarantees.idempotentStart ? { kind: 'invoke' } : { kind: 'in_doubt', why: 'inspect_unknown' };
    default: {
      const _exhaustive: never = state;
      throw new Error(`unknown inspect state ${String(_exhaustive)}`);
    }
  }
};

/** How long a claim lives: the barrier's timeout plus a grace for recording the outcome. */
export const leaseMsOf = (timeoutMs: number, graceMs: number): number => timeoutMs + graceMs;
