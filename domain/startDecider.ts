import type { Command } from '@event-driven-io/emmett';
import { canonicalJson, canonicalJsonOf, canonicalWithout, digestCanonical, digestOf, inCanonicalOrder, RECORD_TAGS, type RecordTag } from './canonical';
import { decodeStartCommand, startedVersionOf, type DecodedStartCommand, type ToolExecutionStartCommand } from './command';
import { digestedBarrierOf, type StartBarrierRecord } from './barrier';
import {
  CorruptRecordError,
  PreconditionError,
  REPLAY_IDENTITIES,
  SemanticConflictError,
  StartCompactedError,
  type ReplayIdentity,
} from './errors';
import { event, type PayloadOf, type StartFacts } from './events';
import { stepRunDigest, stepRunDigestAt, type RunState, type StepRunState } from './state';

// The start decider (R3.1 .. R3.7). Pure: the store looks up the replay index and the Run
// state inside its transaction, hands both in, and appends what this returns atomically.

/** What the replay index says about one identity: the barrier(s) it is bound to. */
export interface ReplayHit {
  readonly startId: string;
  readonly commandDigest: string;
  /** R14.2: the start's Run was compacted; only its compaction record holds it now ('' as its digest: no record binds the Run). */
  readonly compacted?: { readonly runId: string; readonly barrierDigest: string; readonly compactionDigest: string };
}
export type ReplayHits = { readonly [K in ReplayIdentity]: readonly ReplayHit[] };

// A literal in REPLAY_IDENTITIES order (startDecider.unit.spec checks they agree): every start
// builds one, so it is made in one allocation, not from a list of entries.
export const noReplayHits = (): ReplayHits => ({ startId: [], mutationId: [], runEventId: [], traceId: [], auditEventId: [], auditReceiptId: [], attempt: [] });

export interface AttemptKey {
  readonly runId: string;
  readonly stepRunId: string;
  readonly startedStepRunVersion: number;
}

/** The value of each R4.1 identity for one command: what the store looks up. */
export interface ReplayKeys {
  readonly startId: string;
  readonly mutationId: string;
  readonly runEventId: string;
  readonly traceId: string;
  readonly auditEventId: string;
  readonly auditReceiptId: string;
  readonly attempt: AttemptKey;
}

export const replayKeysOf = (c: ToolExecutionStartCommand): ReplayKeys => ({
  startId: c.startId,
  mutationId: c.mutation.mutationId,
  runEventId: c.mutation.runEventId,
  traceId: c.evidence.traceId,
  auditEventId: c.evidence.auditEventId,
  auditReceiptId: c.evidence.auditReceiptId,
  attempt: { runId: c.stepRun.runId, stepRunId: c.stepRun.stepRunId, startedStepRunVersion: startedVersionOf(c) },
});

/** The same identities of a stored barrier: it keeps every binding of its command (R4.1). */
export const replayKeysOfBarrier = (b: StartBarrierRecord): ReplayKeys => ({
  // replayKeysOf(commandOfBarrier(b)), read off the barrier without building the command.
  startId: b.startId,
  mutationId: b.mutation.mutationId,
  runEventId: b.runEvent.runEventId,
  traceId: b.trace.traceId,
  auditEventId: b.audit.auditEventId,
  auditReceiptId: b.audit.auditReceiptId,
  attempt: { runId: b.runId, stepRunId: b.stepRunId, startedStepRunVersion: b.attempt.fromStepRunVersion + 1 },
});

const describeKey = (keys: ReplayKeys, identity: ReplayIdentity): string => {
  if (identity !== 'attempt') return keys[identity];
  const a = keys.attempt;
  return `(${a.runId}, ${a.stepRunId}, ${a.startedStepRunVersion})`;
};

export type ReplayDecision = { readonly kind: 'new' } | { readonly kind: 'existing'; readonly startId: string };

/**
 * R3.1 / R4.1-R4.3. Every identity free -> new. Every identity bound to one barrier with the
 * same command digest -> existing (a lost response replayed). Anything else is drift: a typed
 * conflict naming the first identity, in R4.1 order, that is bound elsewhere or differently.
 * An identity bound to several barriers, or a partial binding to our own barrier, can only be
 * damage: fail closed.
 */
export const classifyReplay = (decoded: DecodedStartCommand, hits: ReplayHits): ReplayDecision => {
  const keys = replayKeysOf(decoded.command);
  for (const identity of REPLAY_IDENTITIES) {
    const found = hits[identity];
    if (found.length > 1) {
      throw new CorruptRecordError('replay index', describeKey(keys, identity), `${identity} is bound to ${found.length} barriers`);
    }
  }
  for (const identity of REPLAY_IDENTITIES) {
    const hit = hits[identity][0];
    if (hit === undefined) continue;
    if (hit.startId !== decoded.command.startId || hit.commandDigest !== decoded.commandDigest) {
      throw new SemanticConflictError(identity, describeKey(keys, identity), hit.startId);
    }
  }
  const bound = REPLAY_IDENTITIES.filter((identity) => hits[identity].length > 0);
  if (bound.length === 0) return { kind: 'new' };
  if (bound.length === REPLAY_IDENTITIES.length) {
    // R14.2: an exact replay of a compacted start is answered as such, never `created`.
    const compacted = REPLAY_IDENTITIES.map((identity) => hits[identity][0]?.compacted);
    const first = compacted[0];
    // a compacted identity whose Run no compaction record binds (read back as '') is damage, not an answer
    if (compacted.some((c) => c?.compactionDigest === '')) {
      throw new CorruptRecordError('compaction record', decoded.command.startId, 'its compacted identities name a Run no compaction record binds');
    }
    if (first !== undefined && compacted.every((c) => c?.compactionDigest === first.compactionDigest)) {
      throw new StartCompactedError(decoded.command.startId, first.runId, first.barrierDigest, first.compactionDigest);
    }
    if (compacted.some((c) => c !== undefined)) throw new CorruptRecordError('replay index', decoded.command.startId, 'start is indexed both live and compacted');
    return { kind: 'existing', startId: decoded.command.startId };
  }
  const missing = REPLAY_IDENTITIES.filter((identity) => hits[identity].length === 0);
  throw new CorruptRecordError('replay index', decoded.command.startId, `start is indexed under ${bound.join(', ')} but not under ${missing.join(', ')}`);
};

/** R2.2 and R3.2: re-verify Run, StepRun, version, digest, status, Definition, Project, approval. */
export const checkStartPreconditions = (c: ToolExecutionStartCommand, state: RunState): StepRunState => {
  const { runId, stepRunId } = c.stepRun;
  const run = state.run;
  if (run === null || run.runId !== runId) throw new PreconditionError('run_not_found', `Run ${runId} does not exist`);
  if (run.projectId !== c.project.projectId) {
    throw new PreconditionError('project_mismatch', `Run ${runId} belongs to project ${run.projectId}, not ${c.project.projectId}`, c.project.projectId, run.projectId);
  }
  if (run.snapshotId !== c.project.snapshotId || run.snapshotDigest !== c.project.snapshotDigest) {
    throw new PreconditionError('snapshot_mismatch', `Run ${runId} is bound to snapshot ${run.snapshotId}@${run.snapshotDigest}, not the command's ${c.project.snapshotId}@${c.project.snapshotDigest}`, c.project, { snapshotId: run.snapshotId, snapshotDigest: run.snapshotDigest });
  }
  const s = state.stepRuns[stepRunId];
  if (s === undefined) throw new PreconditionError('step_run_not_found', `StepRun ${stepRunId} does not exist in Run ${runId}`);
  if (s.projectId !== c.project.projectId) {
    throw new PreconditionError('project_mismatch', `StepRun ${stepRunId} belongs to project ${s.projectId}`, c.project.projectId, s.projectId);
  }
  if (s.kind !== 'tool') throw new PreconditionError('not_a_tool_step_run', `StepRun ${stepRunId} is a ${s.kind} StepRun, not a tool StepRun`, 'tool', s.kind);
  if (s.status !== c.mutation.fromStatus) {
    throw new PreconditionError('status_mismatch', `StepRun ${stepRunId} is ${s.status}, the command moves it from ${c.mutation.fromStatus}`, c.mutation.fromStatus, s.status);
  }
  if (s.version !== c.stepRun.expectedVersion) {
    throw new PreconditionError('version_mismatch', `StepRun ${stepRunId} is at version ${s.version}, the command expects ${c.stepRun.expectedVersion}`, c.stepRun.expectedVersion, s.version);
  }
  const actualDigest = stepRunDigest(s);
  if (actualDigest !== c.stepRun.expectedDigest) {
    throw new PreconditionError('digest_mismatch', `StepRun ${stepRunId} digest is ${actualDigest}, the command expects ${c.stepRun.expectedDigest}`, c.stepRun.expectedDigest, actualDigest);
  }
  const def = s.toolDefinition;
  if (def === undefined || def.id !== c.toolDefinition.id || def.digest !== c.toolDefinition.digest) {
    throw new PreconditionError('definition_mismatch', `StepRun ${stepRunId} is bound to Tool Definition ${def?.id ?? '(none)'}@${def?.digest ?? '-'}`, c.toolDefinition, def);
  }
  if (s.status === 'waiting_approval') {
    if (c.approval === undefined) throw new PreconditionError('approval_missing', `StepRun ${stepRunId} waits for approval ${s.approval?.approvalRequestId ?? '?'}; the command binds none`);
    const a = s.approval;
    if (a === undefined || a.approvalRequestId !== c.approval.approvalRequestId || a.dispatchId !== c.approval.dispatchId || a.approvalDigest !== c.approval.approvalDigest) {
      throw new PreconditionError('approval_mismatch', `StepRun ${stepRunId} is bound to a different approval than the command's`, c.approval, a);
    }
  } else if (c.approval !== undefined) {
    throw new PreconditionError('approval_unexpected', `StepRun ${stepRunId} is ready with no approval bound; the command binds approval ${c.approval.approvalRequestId}`);
  }
  return s;
};

// --- digests of each fact, exported so stores re-verify on read exactly as decided (R5.3) ---

type AuditData = PayloadOf<'SecurityAuditEventRecorded'>;
type TraceData = PayloadOf<'TraceAnchorRecorded'>;
type ReceiptData = PayloadOf<'AuditReceiptIssued'>;
type StartedData = PayloadOf<'StepRunStarted'>;

export const auditEventDigestOf = ({ auditEventDigest: _, ...d }: AuditData): string => digestOf(RECORD_TAGS.auditEvent, d);
export const traceDigestOf = ({ traceDigest: _, ...d }: TraceData): string => digestOf(RECORD_TAGS.traceAnchor, d);
export const receiptDigestOf = ({ receiptDigest: _, ...d }: ReceiptData): string => digestOf(RECORD_TAGS.auditReceipt, d);
export const mutationDigestOf = ({ mutationDigest: _, ...d }: StartedData): string => digestOf(RECORD_TAGS.mutation, d);

/** A digest's length: a record sealed with this placeholder prints as it will with its real digest. */
const PENDING_DIGEST = `sha256:${'0'.repeat(64)}`;

/**
 * A fact's own digest and the canonical text of the fact with it, from one serialisation: the
 * record printed with a placeholder digest of the same length, the digest taken over that text
 * with the member cut out (the canonical text of the record without it), then put in place,
 * in the text and in `body` (which becomes the fact). The store writes that text, so the write
 * plan need not serialise the fact again. `body` lists its keys in canonical order, so it is
 * printed natively whenever the bindings it carries do too (canonicalJsonOf).
 */
const withOwnDigest = <T extends object>(tag: RecordTag, body: T, key: keyof T & string, digestOfRecord: (record: T) => string): { digest: string; text: string } => {
  const fields = body as Record<string, unknown>;
  fields[key] = PENDING_DIGEST;
  const pending = canonicalJsonOf(body);
  const member = `"${key}":"${PENDING_DIGEST}"`;
  const without = canonicalWithout(pending, member);
  if (without !== undefined) {
    const digest = digestCanonical(tag, without);
    fields[key] = digest;
    const at = pending.indexOf(member);
    return { digest, text: `${pending.slice(0, at)}"${key}":"${digest}"${pending.slice(at + member.length)}` };
  }
  const digest = digestOfRecord(body);
  fields[key] = digest;
  return { digest, text: canonicalJson(body) };
};

/** The canonical JSON of each start fact's data, and of the barrier record, as the store writes them. */
export interface StartFactsJson {
  readonly audit: string;
  readonly trace: string;
  readonly receipt: string;
  readonly mutation: string;
  readonly barrier: string;
}

/** R3.3 .. R3.7: the five facts of one start, in order. Commit time is not decided here (R3.10). */
export const buildStartFacts = (decoded: DecodedStartCommand, state: RunState): StartFacts => buildStartFactsWithJson(decoded, state).facts;

/** buildStartFacts, with the canonical JSON it computed on the way (each fact serialised once). */
export const buildStartFactsWithJson = (decoded: DecodedStartCommand, state: RunState): { facts: StartFacts; json: StartFactsJson } => {
  const c = decoded.command;
  const s = checkStartPreconditions(c, state);
  const run = state.run!;
  const { runId, stepRunId } = c.stepRun;
  // Every record below lists its keys in canonical order and is built field by field, never on
  // a spread (slow to build and to print): with the command's own objects (parsed from its
  // canonical text, so in order too) each prints natively as its canonical JSON.

  const audit: AuditData = {
    action: 'tool_execution.start',
    actionDigest: c.admission.actionDigest,
    admissionDigest: c.admission.admissionDigest,
    auditContract: c.contracts.audit,
    auditEventDigest: '',
    auditEventId: c.evidence.auditEventId,
    commandDigest: decoded.commandDigest,
    decision: 'allowed',
    occurredAtMs: c.requestedAtMs,
    policyFence: c.admission.policyFence,
    projectId: c.project.projectId,
    runId,
    startId: c.startId,
    stepRunId,
  };
  const auditSealed = withOwnDigest(RECORD_TAGS.auditEvent, audit, 'auditEventDigest', auditEventDigestOf);

  const trace: TraceData = {
    commandDigest: decoded.commandDigest,
    runId,
    spanId: c.evidence.spanId,
    startId: c.startId,
    stepRunId,
    traceDigest: '',
    traceId: c.evidence.traceId,
  };
  if (c.evidence.traceparent !== undefined) trace.traceparent = c.evidence.traceparent;
  // The trace the creating attempt ran in: recorded, never compared (not in the command digest).
  if (decoded.w3cTraceId !== undefined) trace.w3cTraceId = decoded.w3cTraceId;
  const traceSealed = withOwnDigest(RECORD_TAGS.traceAnchor, trace, 'traceDigest', traceDigestOf);

  const receipt: ReceiptData = {
    auditEventDigest: audit.auditEventDigest,
    auditEventId: audit.auditEventId,
    auditReceiptId: c.evidence.auditReceiptId,
    receiptDigest: '',
    startId: c.startId,
    traceDigest: trace.traceDigest,
    traceId: trace.traceId,
  };
  const receiptSealed = withOwnDigest(RECORD_TAGS.auditReceipt, receipt, 'receiptDigest', receiptDigestOf);

  const runEventSequence = run.version + 4; // audit, trace, receipt, then the RunEvent itself
  const stepRunVersion = s.version + 1;
  // `approval` sorts first: the record starts with it or without it.
  const mutation = (c.approval ? { approval: c.approval } : {}) as StartedData;
  Object.assign(mutation, {
    fromStatus: c.mutation.fromStatus,
    fromStepRunDigest: c.stepRun.expectedDigest,
    fromStepRunVersion: s.version,
    mutationDigest: '',
    mutationId: c.mutation.mutationId,
    occurredAtMs: c.requestedAtMs,
    runEventId: c.mutation.runEventId,
    runEventSequence,
    runId,
    startId: c.startId,
    startedStepRunDigest: stepRunDigestAt(s, 'running', stepRunVersion),
    stepRunId,
    stepRunVersion,
    toStatus: 'running',
  } satisfies Omit<StartedData, 'approval'>);
  const mutationSealed = withOwnDigest(RECORD_TAGS.mutation, mutation, 'mutationDigest', mutationDigestOf);

  const barrierTrace: StartBarrierRecord['trace'] = { spanId: trace.spanId, traceDigest: trace.traceDigest, traceId: trace.traceId };
  if (trace.traceparent !== undefined) barrierTrace.traceparent = trace.traceparent;
  if (trace.w3cTraceId !== undefined) barrierTrace.w3cTraceId = trace.w3cTraceId;
  const record = (c.approval ? { admission: c.admission, approval: c.approval } : { admission: c.admission }) as StartBarrierRecord;
  Object.assign(record, {
    attempt: {
      fromStatus: c.mutation.fromStatus,
      fromStepRunDigest: mutation.fromStepRunDigest,
      fromStepRunVersion: s.version,
      startedStepRunDigest: mutation.startedStepRunDigest,
      startedStepRunVersion: mutation.stepRunVersion,
    },
    audit: {
      auditEventDigest: audit.auditEventDigest,
      auditEventId: audit.auditEventId,
      auditReceiptDigest: receipt.receiptDigest,
      auditReceiptId: receipt.auditReceiptId,
    },
    commandDigest: decoded.commandDigest,
    contracts: c.contracts,
    handlerBinding: c.handlerBinding,
    mutation: { mutationDigest: mutation.mutationDigest, mutationId: mutation.mutationId },
    projectId: c.project.projectId,
    requestedAtMs: c.requestedAtMs,
    runEvent: { runEventId: mutation.runEventId, runEventSequence },
    runId,
    schema: 'qinglong/tool-execution-start-barrier@v1',
    snapshotDigest: c.project.snapshotDigest,
    snapshotId: c.project.snapshotId,
    startId: c.startId,
    stepRunId,
    toolDefinition: c.toolDefinition,
    trace: barrierTrace,
  } satisfies Omit<StartBarrierRecord, 'admission' | 'approval'>);
  const sealed = digestedBarrierOf(record);

  const facts: StartFacts = [
    event('SecurityAuditEventRecorded', audit),
    event('TraceAnchorRecorded', trace),
    event('AuditReceiptIssued', receipt),
    event('StepRunStarted', mutation),
    // The record in its canonical key order, as every read hands it back: a replayed response is
    // byte-identical to the first one (R4.2), whichever serialiser the caller uses. Built in that
    // order, it is its own copy; otherwise (a command whose objects were not) it is re-read.
    event('ToolExecutionStartBarrierCommitted', {
      barrier: inCanonicalOrder(record) ? record : (JSON.parse(sealed.canonical) as StartBarrierRecord),
      barrierDigest: sealed.barrierDigest,
    }),
  ];
  return { facts, json: { audit: auditSealed.text, trace: traceSealed.text, receipt: receiptSealed.text, mutation: mutationSealed.text, barrier: sealed.canonical } };
};

/** emmett command: the raw input plus what the replay index returned inside the transaction. */
export type StartToolExecution = Command<'StartToolExecution', { command: unknown }, { replay: ReplayHits }>;

export const startToolExecution = (command: unknown, replay: ReplayHits = noReplayHits()): StartToolExecution => ({
  type: 'StartToolExecution',
  data: { command },
  metadata: { replay },
});

/** Exact replay decides nothing (the store returns the stored barrier); a new start decides five facts. */
export const decideStart = (command: StartToolExecution, state: RunState): StartFacts | [] =>
  decideDecodedStart(decodeStartCommand(command.data.command), command.metadata.replay, state);

/** The same decision for stores, which decode once up front to know which identities to look up. */
export const decideDecodedStart = (decoded: DecodedStartCommand, replay: ReplayHits, state: RunState): StartFacts | [] =>
  classifyReplay(decoded, replay).kind === 'existing' ? [] : buildStartFacts(decoded, state);
