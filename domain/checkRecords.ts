import type * as t from 'io-ts';
import { MAX_BARRIER_BYTES, StoredStartBarrierRecord, barrierMatchesItsCommand, type DigestedBarrier, type StartBarrierRecord } from './barrier';
import { canonicalJson, canonicalWithout, digestCanonical, isCanonicalTextOf, RECORD_TAGS, type RecordTag } from './canonical';
import { PAYLOAD_CODECS, type PayloadOf, type RunEventType, type StartFacts } from './events';

// R5.3 at the cost of one pass. The verifiers of barrier.ts, events.ts and verify.ts are the
// oracle: they decode on a private copy with io-ts contexts, canonicalise each text again for
// every digest, and decode the barrier a second time inside its event. The checks below ask
// the same questions of the same stored text once each: parse once, canonical = re-serialise
// and compare, one digest per proven text, and the barrier event compared by bytes.
//
// Each check only *proves* a record good. It answers `undefined` whenever it cannot (damage,
// or text outside what it is sure about, such as `\u` escapes); the caller then runs the
// oracle, which decides and explains. So a damaged record fails with the oracle's very error,
// and the property spec (specs/domain/checkRecords.unit.spec.ts and the row spec beside it)
// holds this pass to the oracle's verdict on valid and damaged records alike.

/**
 * Text the one pass is sure about: no surrogate (paired or lone) and no `\u` escape that could
 * hide a lone one, which the oracle's plain-JSON walk refuses. Records here are ASCII in
 * practice; anything else is left to the oracle.
 */
const UNSURE_TEXT = /[\uD800-\uDFFF]|\\u/;
const plainText = (text: unknown): text is string => typeof text === 'string' && !UNSURE_TEXT.test(text);

/** Parse, validate against the codec (no copy, no contexts), and demand canonical bytes. */
export const provenJson = <A>(codec: t.Type<A, A, unknown>, text: unknown): A | undefined => {
  if (!plainText(text)) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  // A valid record is plain JSON no deeper than the codec's shape, so the oracle's depth and
  // plain-value walk can refuse nothing the codec accepts from parsed, escape-free text. `is`
  // gives `validate`'s verdict without the contexts io-ts builds for error paths.
  if (!codec.is(value)) return undefined;
  if (!isCanonicalTextOf(value, text)) return undefined;
  return value as A;
};

/** A stored event payload of `type`, proven as decodeRunEvent + the canonical check would. */
export const provenPayload = (type: RunEventType, text: unknown): unknown => provenJson(PAYLOAD_CODECS[type] as t.Type<unknown, unknown, unknown>, text);

/**
 * commandDigestOf(commandOfBarrier(b)), the oracle's rebuild of the command, for a barrier parsed
 * from text just proven canonical: every object it shares with the command already lists its
 * keys in order, and the ones built here list theirs in order too, so the native serialiser
 * prints the canonical text without sorting (a command's optional fields where they sort).
 */
const commandDigestOfProven = (b: StartBarrierRecord): string => {
  const command = {
    admission: b.admission,
    ...(b.approval ? { approval: b.approval } : {}),
    contracts: b.contracts,
    evidence: {
      auditEventId: b.audit.auditEventId,
      auditReceiptId: b.audit.auditReceiptId,
      spanId: b.trace.spanId,
      traceId: b.trace.traceId,
      ...(b.trace.traceparent === undefined ? {} : { traceparent: b.trace.traceparent }),
    },
    handlerBinding: b.handlerBinding,
    mutation: { fromStatus: b.attempt.fromStatus, mutationId: b.mutation.mutationId, runEventId: b.runEvent.runEventId, toStatus: 'running' },
    project: { projectId: b.projectId, snapshotDigest: b.snapshotDigest, snapshotId: b.snapshotId },
    requestedAtMs: b.requestedAtMs,
    schema: 'qinglong/tool-execution-start-command@v1',
    startId: b.startId,
    stepRun: { expectedDigest: b.attempt.fromStepRunDigest, expectedVersion: b.attempt.fromStepRunVersion, kind: 'tool', runId: b.runId, stepRunId: b.stepRunId },
    toolDefinition: b.toolDefinition,
  };
  return digestCanonical(RECORD_TAGS.command, JSON.stringify(command));
};

/** startedStepRunDigestOf(b), printed natively as commandDigestOfProven is: the StepRun's keys in order, its objects the barrier's own. */
const startedStepRunDigestOfProven = (b: StartBarrierRecord): string => {
  const rest = {
    kind: 'tool',
    projectId: b.projectId,
    runId: b.runId,
    status: 'running',
    stepRunId: b.stepRunId,
    toolDefinition: b.toolDefinition,
    version: b.attempt.startedStepRunVersion,
  };
  // `approval` sorts first; printed before the rest rather than spread into a new object (slow to build and to print).
  const text = b.approval ? `{"approval":${JSON.stringify(b.approval)},${JSON.stringify(rest).slice(1)}` : JSON.stringify(rest);
  return digestCanonical(RECORD_TAGS.stepRun, text);
};

/** The barrier text proven as verifyStoredBarrier would: codec, R1.2 size, canonical, digest, startId, command digest. */
export const provenBarrier = (startId: string, text: unknown, storedDigest: unknown): DigestedBarrier | undefined => {
  if (typeof text !== 'string' || text.length > MAX_BARRIER_BYTES || Buffer.byteLength(text, 'utf8') > MAX_BARRIER_BYTES) return undefined;
  // As stored: legacy barriers with annotations read and verify, as verifyStoredBarrier lets them.
  const record = provenJson(StoredStartBarrierRecord, text);
  if (record === undefined) return undefined;
  const barrierDigest = digestCanonical(RECORD_TAGS.barrier, text);
  if (barrierDigest !== storedDigest || record.startId !== startId) return undefined;
  if (!(record.annotations === undefined ? commandDigestOfProven(record) === record.commandDigest : barrierMatchesItsCommand(record))) return undefined;
  return { record, canonical: text, barrierDigest };
};

/**
 * The digest a fact carries, recomputed from its proven canonical text: the canonical JSON of
 * the record without its digest field is that text with the one member cut out (keys stay
 * sorted). The member is found by its exact bytes and must occur once, so it is the top-level
 * one; otherwise the body is serialised again.
 */
const digestWithout = <T extends object>(tag: RecordTag, text: string, value: T, key: keyof T & string): string => {
  const body = canonicalWithout(text, `"${key}":${JSON.stringify(value[key])}`);
  if (body !== undefined) return digestCanonical(tag, body);
  const { [key]: _, ...rest } = value;
  return digestCanonical(tag, canonicalJson(rest));
};

/** The proven canonical text of the four fact payloads, in fact order. */
export interface FactTexts {
  readonly audit: string;
  readonly trace: string;
  readonly receipt: string;
  readonly mutation: string;
}

/**
 * Every question verifyStartFacts asks, as one boolean: the facts agree with the barrier field
 * by field and every digest recomputes. `facts` hold payloads proven from `texts`, and the
 * barrier event's data is `{ barrier: sealed.record, barrierDigest }` (compared by bytes).
 */
export const factsAgree = (sealed: DigestedBarrier, facts: StartFacts, texts: FactTexts): boolean => {
  const b = sealed.record;
  const [audit, trace, receipt, started, committed] = facts;
  const a = audit.data;
  const af = a.policyFence;
  const bf = b.admission.policyFence;
  if (
    a.auditEventId !== b.audit.auditEventId ||
    a.auditEventDigest !== b.audit.auditEventDigest ||
    a.commandDigest !== b.commandDigest ||
    a.startId !== b.startId ||
    a.runId !== b.runId ||
    a.stepRunId !== b.stepRunId ||
    a.projectId !== b.projectId ||
    a.actionDigest !== b.admission.actionDigest ||
    a.admissionDigest !== b.admission.admissionDigest ||
    // Both sides passed their strict codecs: exactly these fields, so field by field is deep equality.
    af.policyId !== bf.policyId ||
    af.policyVersion !== bf.policyVersion ||
    af.policyDigest !== bf.policyDigest ||
    a.auditContract.id !== b.contracts.audit.id ||
    a.auditContract.digest !== b.contracts.audit.digest ||
    a.occurredAtMs !== b.requestedAtMs
  ) {
    return false;
  }
  const tr = trace.data;
  if (
    tr.traceId !== b.trace.traceId ||
    tr.spanId !== b.trace.spanId ||
    tr.traceDigest !== b.trace.traceDigest ||
    tr.traceparent !== b.trace.traceparent ||
    tr.w3cTraceId !== b.trace.w3cTraceId ||
    tr.commandDigest !== b.commandDigest ||
    tr.startId !== b.startId
  ) {
    return false;
  }
  const r = receipt.data;
  if (
    r.auditReceiptId !== b.audit.auditReceiptId ||
    r.receiptDigest !== b.audit.auditReceiptDigest ||
    r.auditEventDigest !== a.auditEventDigest ||
    r.traceDigest !== tr.traceDigest ||
    r.startId !== b.startId
  ) {
    return false;
  }
  const m = started.data;
  if (
    m.mutationId !== b.mutation.mutationId ||
    m.mutationDigest !== b.mutation.mutationDigest ||
    m.runEventId !== b.runEvent.runEventId ||
    m.runEventSequence !== b.runEvent.runEventSequence ||
    !startedMatchesAttempt(m, b)
  ) {
    return false;
  }
  if (committed.data.barrier !== b || committed.data.barrierDigest !== sealed.barrierDigest) return false;
  // The digests last: the field comparisons above are cheaper and catch most drift.
  return digestsRecompute(b, [a, tr, r, m], texts);
};

/**
 * The digests of verifyStartFacts, for facts that agree with the barrier field by field: each
 * fact's own digest (the barrier names the same one) recomputed from its proven canonical
 * text, and the started StepRun's from the barrier.
 */
const digestsRecompute = (b: StartBarrierRecord, [a, tr, r, m]: FactPayloads, texts: FactTexts): boolean =>
  digestWithout(RECORD_TAGS.auditEvent, texts.audit, a, 'auditEventDigest') === b.audit.auditEventDigest &&
  digestWithout(RECORD_TAGS.traceAnchor, texts.trace, tr, 'traceDigest') === b.trace.traceDigest &&
  digestWithout(RECORD_TAGS.auditReceipt, texts.receipt, r, 'receiptDigest') === b.audit.auditReceiptDigest &&
  digestWithout(RECORD_TAGS.mutation, texts.mutation, m, 'mutationDigest') === b.mutation.mutationDigest &&
  startedStepRunDigestOfProven(b) === b.attempt.startedStepRunDigest;

/** The four fact payloads of a start, in fact order. */
export type FactPayloads = readonly [
  PayloadOf<'SecurityAuditEventRecorded'>,
  PayloadOf<'TraceAnchorRecorded'>,
  PayloadOf<'AuditReceiptIssued'>,
  PayloadOf<'StepRunStarted'>,
];

/**
 * The four fact payloads a proven barrier implies, as the decider builds them for the command
 * the barrier keeps, and their canonical text. Each is written with its keys in canonical
 * order, and every object it shares with the barrier lists its keys in order (the barrier's
 * text was proven canonical), so the native serialiser prints the canonical text.
 *
 * Stored texts equal to these pass every check verifyStartFacts makes of the facts, once their
 * digests recompute (impliedFactsHold): each field is a constant of its codec or the barrier's
 * own value under a codec that accepts it, so the text parses, decodes and is canonical, and
 * each field agrees with the barrier by construction. Stored texts that differ are not refused
 * here: the caller proves them the long way, or the oracle judges them.
 */
export const impliedFacts = (sealed: DigestedBarrier): { readonly payloads: FactPayloads; readonly texts: FactTexts } => {
  const b = sealed.record;
  const audit: PayloadOf<'SecurityAuditEventRecorded'> = {
    action: 'tool_execution.start',
    actionDigest: b.admission.actionDigest,
    admissionDigest: b.admission.admissionDigest,
    auditContract: b.contracts.audit,
    auditEventDigest: b.audit.auditEventDigest,
    auditEventId: b.audit.auditEventId,
    commandDigest: b.commandDigest,
    decision: 'allowed',
    occurredAtMs: b.requestedAtMs,
    policyFence: b.admission.policyFence,
    projectId: b.projectId,
    runId: b.runId,
    startId: b.startId,
    stepRunId: b.stepRunId,
  };
  const trace: PayloadOf<'TraceAnchorRecorded'> = {
    commandDigest: b.commandDigest,
    runId: b.runId,
    spanId: b.trace.spanId,
    startId: b.startId,
    stepRunId: b.stepRunId,
    traceDigest: b.trace.traceDigest,
    traceId: b.trace.traceId,
  };
  // Set, not spread: its place (last) is its canonical one, and an object literal built on a
  // spread is a slow object to build and to print.
  if (b.trace.traceparent !== undefined) trace.traceparent = b.trace.traceparent;
  if (b.trace.w3cTraceId !== undefined) trace.w3cTraceId = b.trace.w3cTraceId;
  const receipt: PayloadOf<'AuditReceiptIssued'> = {
    auditEventDigest: b.audit.auditEventDigest,
    auditEventId: b.audit.auditEventId,
    auditReceiptId: b.audit.auditReceiptId,
    receiptDigest: b.audit.auditReceiptDigest,
    startId: b.startId,
    traceDigest: b.trace.traceDigest,
    traceId: b.trace.traceId,
  };
  // `approval` sorts first: the object starts with it or without it, never from a spread.
  const mutation = (b.approval ? { approval: b.approval } : {}) as PayloadOf<'StepRunStarted'>;
  Object.assign(mutation, {
    fromStatus: b.attempt.fromStatus,
    fromStepRunDigest: b.attempt.fromStepRunDigest,
    fromStepRunVersion: b.attempt.fromStepRunVersion,
    mutationDigest: b.mutation.mutationDigest,
    mutationId: b.mutation.mutationId,
    occurredAtMs: b.requestedAtMs,
    runEventId: b.runEvent.runEventId,
    runEventSequence: b.runEvent.runEventSequence,
    runId: b.runId,
    startId: b.startId,
    startedStepRunDigest: b.attempt.startedStepRunDigest,
    stepRunId: b.stepRunId,
    stepRunVersion: b.attempt.startedStepRunVersion,
    toStatus: 'running',
  });
  return {
    payloads: [audit, trace, receipt, mutation],
    texts: { audit: JSON.stringify(audit), trace: JSON.stringify(trace), receipt: JSON.stringify(receipt), mutation: JSON.stringify(mutation) },
  };
};

/** The digests of the facts a proven barrier implies (impliedFacts' texts) recompute, and so does its started StepRun's. */
export const impliedFactsHold = (sealed: DigestedBarrier, implied: { readonly payloads: FactPayloads; readonly texts: FactTexts }): boolean =>
  digestsRecompute(sealed.record, implied.payloads, implied.texts);

/** The bytes of the barrier event's data for a proven barrier: the only canonical text of `{ barrier, barrierDigest }`. */
export const barrierEventJsonOf = (sealed: DigestedBarrier): string => `{"barrier":${sealed.canonical},"barrierDigest":${JSON.stringify(sealed.barrierDigest)}}`;


/** Whether a StepRunStarted moved exactly the attempt the barrier names, for its start, at its time (both checks ask it). */
export const startedMatchesAttempt = (m: PayloadOf<'StepRunStarted'>, b: StartBarrierRecord): boolean =>
  m.fromStatus === b.attempt.fromStatus &&
  m.fromStepRunVersion === b.attempt.fromStepRunVersion &&
  m.fromStepRunDigest === b.attempt.fromStepRunDigest &&
  m.stepRunVersion === b.attempt.startedStepRunVersion &&
  m.startedStepRunDigest === b.attempt.startedStepRunDigest &&
  m.startId === b.startId &&
  m.runId === b.runId &&
  m.stepRunId === b.stepRunId &&
  m.occurredAtMs === b.requestedAtMs;
