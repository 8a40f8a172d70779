import * as t from 'io-ts';
import { canonicalJson, canonicalJsonOf, digestCanonical, RECORD_TAGS, utf8Length } from './canonical';
import {
  Annotations,
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
import { Traceparent, W3cTraceId } from './traceContext';
import { Admission, ApprovalBinding, ReviewedContracts, STARTABLE_STATUSES, commandDigestOf, type ToolExecutionStartCommand } from './command';
import { CorruptRecordError, ValidationError, isStartBarrierError } from './errors';

export const BARRIER_SCHEMA = RECORD_TAGS.barrier;
/** R1.2: 16,384 bytes of UTF-8 canonical JSON, inclusive. */
export const MAX_BARRIER_BYTES = 16_384;

/**
 * `qinglong/tool-execution-start-barrier@v1`: the immutable, low-sensitivity proof that one
 * start attempt was authorised with all its evidence (R1.2, R1.5). No commit time inside: the
 * store stamps that beside the record (R3.10), so the record's digest is decided, not observed.
 */
const BARRIER_FIELDS = {
  schema: literal(BARRIER_SCHEMA),
  startId: Identity,
  commandDigest: Digest,
  requestedAtMs: EpochMillis,
  projectId: Identity,
  snapshotId: Identity,
  snapshotDigest: Digest,
  runId: Identity,
  stepRunId: Identity,
  toolDefinition: Ref,
  handlerBinding: Ref,
  admission: Admission,
  contracts: ReviewedContracts,
  attempt: strictObject('BarrierAttempt', {
    fromStatus: oneOf(STARTABLE_STATUSES),
    fromStepRunVersion: Version,
    fromStepRunDigest: Digest,
    startedStepRunVersion: Version,
    startedStepRunDigest: Digest,
  }),
  mutation: strictObject('BarrierMutation', { mutationId: Identity, mutationDigest: Digest }),
  runEvent: strictObject('BarrierRunEvent', { runEventId: Identity, runEventSequence: Sequence }),
  trace: strictObject('BarrierTrace', { traceId: Identity, spanId: Identity, traceDigest: Digest }, { traceparent: Traceparent, w3cTraceId: W3cTraceId }),
  audit: strictObject('BarrierAudit', {
    auditEventId: Identity,
    auditEventDigest: Digest,
    auditReceiptId: Identity,
    auditReceiptDigest: Digest,
  }),
};
export const StartBarrierRecord = strictObject('StartBarrierRecord', BARRIER_FIELDS, { approval: ApprovalBinding });

/**
 * A barrier as stored. Stores written before R10.2 may hold barriers with `annotations`, free
 * text the command then carried; they are immutable and bound by digest, so they are read and
 * verified as legacy records. No write path accepts them: the command codec refuses the field.
 */
export const StoredStartBarrierRecord = strictObject('StartBarrierRecord', BARRIER_FIELDS, { approval: ApprovalBinding, annotations: Annotations });
export type StartBarrierRecord = t.TypeOf<typeof StoredStartBarrierRecord>;

/** A barrier record with its canonical JSON and its digest (a digest, not a keyed seal: that is R9.4's MAC). */
export interface DigestedBarrier {
  readonly record: StartBarrierRecord;
  readonly canonical: string;
  readonly barrierDigest: string;
}
/** @deprecated the old name of DigestedBarrier. */
export type SealedBarrier = DigestedBarrier;

/** Canonicalise, enforce R1.2's byte limit, and digest under the barrier's own tag (R1.3). */
export const digestedBarrierOf = (record: StartBarrierRecord): DigestedBarrier => {
  const canonical = canonicalJsonOf(record);
  const bytes = utf8Length(canonical);
  if (bytes > MAX_BARRIER_BYTES) {
    throw new ValidationError('start barrier', [
      { path: '(root)', reason: 'too_large', message: `canonical JSON is ${bytes} bytes, the limit is ${MAX_BARRIER_BYTES} (R1.2)` },
    ]);
  }
  return { record, canonical, barrierDigest: digestCanonical(RECORD_TAGS.barrier, canonical) };
};
/** @deprecated the old name of digestedBarrierOf: it computes a digest; "seal" is the keyed MAC of R9.4. */
export const sealBarrier = digestedBarrierOf;

export const decodeBarrierRecord = (input: unknown): DigestedBarrier =>
  digestedBarrierOf(decodeOrThrow(StartBarrierRecord, 'start barrier', input));

/** The read side: legacy barriers with annotations included (see StoredStartBarrierRecord). */
export const decodeStoredBarrierRecord = (input: unknown): DigestedBarrier =>
  digestedBarrierOf(decodeOrThrow(StoredStartBarrierRecord, 'start barrier', input));

/**
 * R5.3 on read: the stored text must parse, decode, be byte-for-byte canonical, and hash to
 * the stored digest. Any failure is corruption, reported closed.
 */
export const verifyStoredBarrier = (startId: string, storedJson: string, storedDigest: string): DigestedBarrier => {
  let sealed: DigestedBarrier;
  try {
    sealed = decodeStoredBarrierRecord(JSON.parse(storedJson));
  } catch (e) {
    const why = isStartBarrierError(e) || e instanceof SyntaxError ? e.message : String(e);
    throw new CorruptRecordError('start barrier', startId, `stored JSON does not decode: ${why}`);
  }
  if (sealed.canonical !== storedJson) throw new CorruptRecordError('start barrier', startId, 'stored JSON is not in canonical form');
  if (sealed.barrierDigest !== storedDigest) throw new CorruptRecordError('start barrier', startId, 'barrier digest does not match its JSON');
  if (sealed.record.startId !== startId) throw new CorruptRecordError('start barrier', startId, 'startId column does not match its JSON');
  if (!barrierMatchesItsCommand(sealed.record)) throw new CorruptRecordError('start barrier', startId, 'barrier content does not recompute its commandDigest');
  return sealed;
};

/**
 * The barrier keeps every binding of its command, so the command can be rebuilt from it and
 * its digest recomputed: a barrier whose content drifted from the command it claims fails.
 */
export const commandOfBarrier = (b: StartBarrierRecord): ToolExecutionStartCommand => ({
  schema: 'qinglong/tool-execution-start-command@v1',
  startId: b.startId,
  requestedAtMs: b.requestedAtMs,
  project: { projectId: b.projectId, snapshotId: b.snapshotId, snapshotDigest: b.snapshotDigest },
  toolDefinition: b.toolDefinition,
  handlerBinding: b.handlerBinding,
  admission: b.admission,
  contracts: b.contracts,
  stepRun: { runId: b.runId, stepRunId: b.stepRunId, kind: 'tool', expectedVersion: b.attempt.fromStepRunVersion, expectedDigest: b.attempt.fromStepRunDigest },
  evidence: {
    traceId: b.trace.traceId,
    spanId: b.trace.spanId,
    auditEventId: b.audit.auditEventId,
    auditReceiptId: b.audit.auditReceiptId,
    ...(b.trace.traceparent === undefined ? {} : { traceparent: b.trace.traceparent }),
  },
  mutation: { mutationId: b.mutation.mutationId, runEventId: b.runEvent.runEventId, fromStatus: b.attempt.fromStatus, toStatus: 'running' },
  ...(b.approval ? { approval: b.approval } : {}),
});

/** A legacy barrier's command carried its annotations too: they are part of its digest. */
export const barrierMatchesItsCommand = (b: StartBarrierRecord): boolean =>
  b.annotations === undefined
    ? commandDigestOf(commandOfBarrier(b)) === b.commandDigest
    : digestCanonical(RECORD_TAGS.command, canonicalJson({ ...commandOfBarrier(b), annotations: b.annotations })) === b.commandDigest;
