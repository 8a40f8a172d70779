import type * as t from 'io-ts';
import { MAX_BARRIER_BYTES, StoredStartBarrierRecord, barrierMatchesItsCommand, type SealedBarrier, type StartBarrierRecord } from './barrier';
import { canonicalJson, canonicalWithout, digestCanonical, isCanonicalTextOf, RECORD_TAGS, type RecordTag } from './canonical';
import { PAYLOAD_CODECS, type RunEventType, type StartFacts } from './events';

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
const startedStepRunDigestOfProven = (b: StartBarrierRecord): string =>
  digestCanonical(
    RECORD_TAGS.stepRun,
    JSON.stringify({
      ...(b.approval ? { approval: b.approval } : {}),
      kind: 'tool',
      projectId: b.projectId,
      runId: b.runId,
      status: 'running',
      stepRunId: b.stepRunId,
      toolDefinition: b.toolDefinition,
      version: b.attempt.startedStepRunVersion,
    }),
  );

/** The barrier text proven as verifyStoredBarrier would: codec, R1.2 size, canonical, digest, startId, command digest. */
export const provenBarrier = (startId: string, text: unknown, storedDigest: unknown): SealedBarrier | undefined => {
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
const digestWithout = (tag: RecordTag, text: string, value: Record<string, unknown>, key: string): string => {
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
export const factsAgree = (sealed: SealedBarrier, facts: StartFacts, texts: FactTexts): boolean => {
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
    m.fromStatus !== b.attempt.fromStatus ||
    m.fromStepRunVersion !== b.attempt.fromStepRunVersion ||
    m.fromStepRunDigest !== b.attempt.fromStepRunDigest ||
    m.stepRunVersion !== b.attempt.startedStepRunVersion ||
    m.startedStepRunDigest !== b.attempt.startedStepRunDigest ||
    m.startId !== b.startId ||
    m.runId !== b.runId ||
    m.stepRunId !== b.stepRunId ||
    m.occurredAtMs !== b.requestedAtMs
  ) {
    return false;
  }
  if (committed.data.barrier !== b || committed.data.barrierDigest !== sealed.barrierDigest) return false;
  // The digests last: the field comparisons above are cheaper and catch most drift.
  if (digestWithout(RECORD_TAGS.auditEvent, texts.audit, a, 'auditEventDigest') !== a.auditEventDigest) return false;
  if (digestWithout(RECORD_TAGS.traceAnchor, texts.trace, tr, 'traceDigest') !== tr.traceDigest) return false;
  if (digestWithout(RECORD_TAGS.auditReceipt, texts.receipt, r, 'receiptDigest') !== r.receiptDigest) return false;
  if (digestWithout(RECORD_TAGS.mutation, texts.mutation, m, 'mutationDigest') !== m.mutationDigest) return false;
  return startedStepRunDigestOfProven(b) === b.attempt.startedStepRunDigest;
};

/** The bytes of the barrier event's data for a proven barrier: the only canonical text of `{ barrier, barrierDigest }`. */
export const barrierEventJsonOf = (sealed: SealedBarrier): string => `{"barrier":${sealed.canonical},"barrierDigest":${JSON.stringify(sealed.barrierDigest)}}`;
