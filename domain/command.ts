import * as t from 'io-ts';
import { Traceparent, W3cTraceId } from './traceContext';
import { canonicalCopyOf, canonicalJson, digestCanonical, RECORD_TAGS, utf8Length } from './canonical';
import {
  Digest,
  EpochMillis,
  Identity,
  Ref,
  TimeoutMs,
  Version,
  decodeOrThrow,
  decodeSnapshotOrThrow,
  literal,
  plainCanonicalCopyOf,
  plainJsonIssues,
  oneOf,
  snapshotPlainJson,
  strictObject,
} from './codecs';
import { ValidationError } from './errors';

export const COMMAND_SCHEMA = RECORD_TAGS.command;
/** R1.1: 65,536 bytes of UTF-8 canonical JSON, inclusive. */
export const MAX_COMMAND_BYTES = 65_536;

export const EXECUTION_CLASSES = ['builtin', 'process', 'mcp', 'http', 'worker'] as const;
export type ExecutionClass = (typeof EXECUTION_CLASSES)[number];
export const STARTABLE_STATUSES = ['ready', 'waiting_approval'] as const;
export type StartableStatus = (typeof STARTABLE_STATUSES)[number];

export const PolicyFence = strictObject('PolicyFence', { policyId: Identity, policyVersion: Version, policyDigest: Digest });
export type PolicyFence = t.TypeOf<typeof PolicyFence>;

export const ApprovalBinding = strictObject('ApprovalBinding', {
  approvalRequestId: Identity,
  dispatchId: Identity,
  approvalDigest: Digest,
});
export type ApprovalBinding = t.TypeOf<typeof ApprovalBinding>;

/** R1.4.2: what admission decided. Carried unchanged into the barrier. */
export const Admission = strictObject('Admission', {
  actionDigest: Digest,
  planDigest: Digest,
  admissionDigest: Digest,
  profile: Identity,
  executionClass: oneOf(EXECUTION_CLASSES),
  timeoutMs: TimeoutMs,
  policyFence: PolicyFence,
});

/** R1.4.3: the reviewed adapter, redaction and audit contracts, identity and digest of each. */
export const ReviewedContracts = strictObject('ReviewedContracts', { adapter: Ref, redaction: Ref, audit: Ref });

/** `qinglong/tool-execution-start-command@v1`: exactly the bindings of R1.4, nothing else. */
export const ToolExecutionStartCommand = strictObject(
  'ToolExecutionStartCommand',
  {
    schema: literal(COMMAND_SCHEMA),
    startId: Identity,
    /** The caller's business time. Never the commit time (R3.10). */
    requestedAtMs: EpochMillis,
    // R1.4.1
    project: strictObject('ProjectBinding', { projectId: Identity, snapshotId: Identity, snapshotDigest: Digest }),
    toolDefinition: Ref,
    handlerBinding: Ref,
    // R1.4.2
    admission: Admission,
    // R1.4.3
    contracts: ReviewedContracts,
    // R1.4.5
    stepRun: strictObject('StepRunBinding', {
      runId: Identity,
      stepRunId: Identity,
      kind: literal('tool'),
      expectedVersion: Version,
      expectedDigest: Digest,
    }),
    // R1.4.6
    evidence: strictObject(
      'EvidenceBinding',
      {
        traceId: Identity,
        spanId: Identity,
        auditEventId: Identity,
        auditReceiptId: Identity,
      },
      // The caller's W3C trace context, kept in the trace anchor (optional, strictly formed).
      { traceparent: Traceparent },
    ),
    // R1.4.7
    mutation: strictObject('MutationBinding', {
      mutationId: Identity,
      runEventId: Identity,
      fromStatus: oneOf(STARTABLE_STATUSES),
      toStatus: literal('running'),
    }),
  },
  {
    // R1.4.4
    approval: ApprovalBinding,
  },
);
export type ToolExecutionStartCommand = t.TypeOf<typeof ToolExecutionStartCommand>;

export interface DecodedStartCommand {
  readonly command: ToolExecutionStartCommand;
  readonly canonical: string;
  readonly commandDigest: string;
  /**
   * The W3C trace id of the context this attempt runs in (`withTelemetry` reads it from the
   * caller's active OpenTelemetry context): a new start records it on its trace anchor; it is
   * not part of the command, so a replay from another trace is `existing` and returns the
   * stored anchor with the trace that created it.
   */
  readonly w3cTraceId?: string;
}

/** R1.1: the canonical form, refused past MAX_COMMAND_BYTES of UTF-8. */
const withinCommandLimit = (canonical: string): string => {
  const bytes = utf8Length(canonical);
  if (bytes > MAX_COMMAND_BYTES) {
    throw new ValidationError('start command', [
      { path: '(root)', reason: 'too_large', message: `canonical JSON is ${bytes} bytes, the limit is ${MAX_COMMAND_BYTES} (R1.1)` },
    ]);
  }
  return canonical;
};

/** Boundary for every start command: shape, R1.5 content rules, R1.1 size, then digest. */
/** What a caller may say of the attempt itself, beside its command (never compared on replay). */
export interface StartAttemptContext {
  /** The W3C trace id of the caller's active trace (32 lowercase hex, not all zeros). */
  readonly w3cTraceId?: string;
}
const StartAttemptContext = strictObject('StartAttemptContext', {}, { w3cTraceId: W3cTraceId }, false);

/** decodeStartCommand, with the attempt's context (VALIDATION_FAILED naming its field, before anything is opened). */
export const decodeStartAttempt = (input: unknown, context?: StartAttemptContext): DecodedStartCommand => {
  const decoded = decodeStartCommand(input);
  if (context === undefined) return decoded;
  const { w3cTraceId } = decodeOrThrow(StartAttemptContext, 'start attempt context', context);
  return w3cTraceId === undefined ? decoded : { ...decoded, w3cTraceId };
};

export const decodeStartCommand = (input: unknown): DecodedStartCommand => {
  // One walk proves plain JSON and copies it in canonical order; anything unusual is left to
  // plainJsonIssues, which names each problem by path, and to the copy made the long way.
  const fast = plainCanonicalCopyOf(input);
  const shape = fast === undefined ? plainJsonIssues(input) : [];
  if (shape.length > 0) throw new ValidationError('start command', shape);
  // R1.1 before the content checks: what was sent, not what it says, bounds the cost of reading it.
  // Plain data (no proxy, getter or class, checked just above) reads the same twice.
  // The private copy is what parsing the canonical text gives: nothing the caller does to
  // `input` afterwards can reach it. Copied in canonical key order it is printed natively as
  // that text; otherwise the text is serialised (sorted) and parsed. When the codec accepts the
  // copy (`is` gives `validate`'s verdict without building an error context per field) it is
  // the command; otherwise the copy and the decode that name every problem run as they always did.
  const ordered = fast ?? canonicalCopyOf(input);
  const sent = withinCommandLimit(ordered === undefined ? canonicalJson(input) : ordered.canonical);
  const parsed: unknown = ordered === undefined ? JSON.parse(sent) : ordered.copy;
  let command: ToolExecutionStartCommand;
  let canonical = sent;
  if (ToolExecutionStartCommand.is(parsed)) {
    command = parsed;
  } else {
    const snapshot = snapshotPlainJson('start command', input);
    command = decodeSnapshotOrThrow(ToolExecutionStartCommand, 'start command', snapshot);
    // The codecs reject and never rewrite, so a valid command is the snapshot itself and its
    // canonical form is the one just checked; anything else is serialised and checked again.
    if ((command as unknown) !== snapshot) canonical = withinCommandLimit(canonicalJson(command));
  }
  if (command.mutation.fromStatus === 'waiting_approval' && command.approval === undefined) {
    throw new ValidationError('start command', [
      { path: 'approval', reason: 'invalid_value', message: 'a start from waiting_approval must bind the exact approval (R1.4.4)' },
    ]);
  }
  return { command, canonical, commandDigest: digestCanonical(RECORD_TAGS.command, canonical) };
};

export const commandDigestOf = (command: ToolExecutionStartCommand): string =>
  digestCanonical(RECORD_TAGS.command, canonicalJson(command));

/** The attempt identity of R4.4: the StepRun version this start moves the StepRun to. */
export const startedVersionOf = (command: ToolExecutionStartCommand): number => command.stepRun.expectedVersion + 1;
