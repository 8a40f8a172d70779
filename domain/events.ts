import * as t from 'io-ts';
import type { Event } from '@event-driven-io/emmett';
import {
  Digest,
  EpochMillis,
  Identity,
  Ref,
  Sequence,
  Version,
  decodeOrThrow,
  literal,
  oneOf,
  strictObject,
} from './codecs';
import { ApprovalBinding, PolicyFence, STARTABLE_STATUSES } from './command';
import { StoredStartBarrierRecord } from './barrier';
import { Traceparent, W3cTraceId } from './traceContext';
import { CorruptRecordError, isStartBarrierError } from './errors';
import { StoredResolution } from './resolution';

// Events of one Run stream (`run-<runId>`). Stream version = Run version = RunEvent sequence.
// Each payload has a strict codec: rows read back are decoded, never trusted (R5.3).

export const STEP_RUN_KINDS = ['tool', 'llm', 'human', 'workflow'] as const;
export const STEP_RUN_STATUSES = ['created', 'ready', 'waiting_approval', 'running', 'lost', 'completed', 'failed'] as const;
export type StepRunStatus = (typeof STEP_RUN_STATUSES)[number];

// Outcome facts as stored, legacy free-text reasons included; new ones are codes (resolution.ts).
const Resolution = StoredResolution;

const payloads = {
  RunCreated: strictObject('RunCreated', {
    runId: Identity,
    projectId: Identity,
    snapshotId: Identity,
    snapshotDigest: Digest,
    occurredAtMs: EpochMillis,
  }),
  StepRunCreated: strictObject(
    'StepRunCreated',
    { runId: Identity, stepRunId: Identity, kind: oneOf(STEP_RUN_KINDS), stepRunVersion: Version, occurredAtMs: EpochMillis },
    { toolDefinition: Ref },
  ),
  StepRunReady: strictObject('StepRunReady', {
    runId: Identity,
    stepRunId: Identity,
    stepRunVersion: Version,
    occurredAtMs: EpochMillis,
  }),
  StepRunAwaitingApproval: strictObject('StepRunAwaitingApproval', {
    runId: Identity,
    stepRunId: Identity,
    approval: ApprovalBinding,
    stepRunVersion: Version,
    occurredAtMs: EpochMillis,
  }),
  StepRunLost: strictObject(
    'StepRunLost',
    { runId: Identity, stepRunId: Identity, startId: Identity, stepRunVersion: Version, resolution: Resolution, occurredAtMs: EpochMillis },
  ),
  StepRunCompleted: strictObject(
    'StepRunCompleted',
    { runId: Identity, stepRunId: Identity, startId: Identity, stepRunVersion: Version, resolution: Resolution, occurredAtMs: EpochMillis },
    { outcomeDigest: Digest },
  ),
  StepRunFailed: strictObject(
    'StepRunFailed',
    { runId: Identity, stepRunId: Identity, startId: Identity, stepRunVersion: Version, resolution: Resolution, occurredAtMs: EpochMillis },
    { outcomeDigest: Digest },
  ),
  // --- the five facts of one start, appended together (R3.3 .. R3.7) ---
  SecurityAuditEventRecorded: strictObject('SecurityAuditEventRecorded', {
    auditEventId: Identity,
    startId: Identity,
    projectId: Identity,
    runId: Identity,
    stepRunId: Identity,
    action: literal('tool_execution.start'),
    decision: literal('allowed'),
    actionDigest: Digest,
    admissionDigest: Digest,
    policyFence: PolicyFence,
    auditContract: Ref,
    commandDigest: Digest,
    auditEventDigest: Digest,
    occurredAtMs: EpochMillis,
  }),
  TraceAnchorRecorded: strictObject(
    'TraceAnchorRecorded',
    {
      traceId: Identity,
      spanId: Identity,
      startId: Identity,
      runId: Identity,
      stepRunId: Identity,
      commandDigest: Digest,
      traceDigest: Digest,
    },
    { traceparent: Traceparent, w3cTraceId: W3cTraceId },
  ),
  AuditReceiptIssued: strictObject('AuditReceiptIssued', {
    auditReceiptId: Identity,
    auditEventId: Identity,
    auditEventDigest: Digest,
    traceId: Identity,
    traceDigest: Digest,
    startId: Identity,
    receiptDigest: Digest,
  }),
  StepRunStarted: strictObject(
    'StepRunStarted',
    {
      runEventId: Identity,
      mutationId: Identity,
      startId: Identity,
      runId: Identity,
      stepRunId: Identity,
      fromStatus: oneOf(STARTABLE_STATUSES),
      toStatus: literal('running'),
      fromStepRunVersion: Version,
      stepRunVersion: Version,
      fromStepRunDigest: Digest,
      startedStepRunDigest: Digest,
      runEventSequence: Sequence,
      mutationDigest: Digest,
      occurredAtMs: EpochMillis,
    },
    { approval: ApprovalBinding },
  ),
  ToolExecutionStartBarrierCommitted: strictObject('ToolExecutionStartBarrierCommitted', {
    // as stored: legacy barriers with annotations stay readable (start facts are written only by prepare)
    barrier: StoredStartBarrierRecord,
    barrierDigest: Digest,
  }),
} as const;

type Payloads = typeof payloads;
export type RunEventType = keyof Payloads;
/** The strict codec of each event type, for checks that validate payloads themselves (checkRecords.ts). */
export const PAYLOAD_CODECS: Payloads = payloads;
export const RUN_EVENT_TYPES = Object.keys(payloads) as RunEventType[];
export type PayloadOf<K extends RunEventType> = t.TypeOf<Payloads[K]>;
export type RunStreamEvent = { [K in RunEventType]: Event<K, PayloadOf<K>> }[RunEventType];
export type EventOf<K extends RunEventType> = Extract<RunStreamEvent, { type: K }>;

export const START_FACT_TYPES = [
  'SecurityAuditEventRecorded',
  'TraceAnchorRecorded',
  'AuditReceiptIssued',
  'StepRunStarted',
  'ToolExecutionStartBarrierCommitted',
] as const satisfies readonly RunEventType[];
export type StartFactType = (typeof START_FACT_TYPES)[number];
export type StartFacts = readonly [
  EventOf<'SecurityAuditEventRecorded'>,
  EventOf<'TraceAnchorRecorded'>,
  EventOf<'AuditReceiptIssued'>,
  EventOf<'StepRunStarted'>,
  EventOf<'ToolExecutionStartBarrierCommitted'>,
];

export const isRunEventType = (type: string): type is RunEventType => Object.prototype.hasOwnProperty.call(payloads, type);

/** Rows read back go through here: an unknown type or a payload that fails its codec is corrupt. */
export const decodeRunEvent = (type: string, data: unknown, where: string): RunStreamEvent => {
  if (!isRunEventType(type)) throw new CorruptRecordError('event', where, `unknown event type ${JSON.stringify(type)}`);
  try {
    const decoded = decodeOrThrow(payloads[type] as t.Type<unknown, unknown, unknown>, `${type} event`, data);
    return { type, data: decoded } as RunStreamEvent;
  } catch (e) {
    throw new CorruptRecordError('event', where, isStartBarrierError(e) ? e.message : String(e));
  }
};

export const event = <K extends RunEventType>(type: K, data: PayloadOf<K>): EventOf<K> => ({ type, data }) as unknown as EventOf<K>;
