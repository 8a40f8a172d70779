import { isDeepStrictEqual } from 'node:util';
import type { DigestedBarrier, StartBarrierRecord } from './barrier';
import { startedMatchesAttempt } from './checkRecords';
import { CorruptRecordError } from './errors';
import type { EventOf, StartFacts } from './events';
import { auditEventDigestOf, mutationDigestOf, receiptDigestOf, traceDigestOf } from './startDecider';
import { stepRunDigest } from './state';

/** The digest of the StepRun a barrier says its start left running, recomputed from the barrier alone. */
export const startedStepRunDigestOf = (b: StartBarrierRecord): string =>
  stepRunDigest({
    runId: b.runId,
    stepRunId: b.stepRunId,
    projectId: b.projectId,
    kind: 'tool',
    status: 'running',
    version: b.attempt.startedStepRunVersion,
    toolDefinition: b.toolDefinition,
    ...(b.approval ? { approval: b.approval } : {}),
  });

/**
 * R5.3: a stored barrier and the four facts it binds must agree field by field, and every
 * digest must recompute from the content it covers. Stores call this on every read; any
 * disagreement is corruption, reported closed with what disagreed.
 */
export const verifyStartFacts = (sealed: DigestedBarrier, facts: StartFacts): void => {
  const b = sealed.record;
  const bad = (problem: string): never => {
    throw new CorruptRecordError('start barrier', b.startId, problem);
  };
  const [audit, trace, receipt, started, committed] = facts;
  const expectType = (e: { type: string }, type: string) => e.type === type || bad(`expected a ${type} fact, found ${e.type}`);
  expectType(audit, 'SecurityAuditEventRecorded');
  expectType(trace, 'TraceAnchorRecorded');
  expectType(receipt, 'AuditReceiptIssued');
  expectType(started, 'StepRunStarted');
  expectType(committed, 'ToolExecutionStartBarrierCommitted');

  const a = audit.data;
  if (auditEventDigestOf(a) !== a.auditEventDigest) bad('audit event digest does not match its content');
  if (a.auditEventId !== b.audit.auditEventId || a.auditEventDigest !== b.audit.auditEventDigest) bad('audit event does not match the barrier');
  if (a.commandDigest !== b.commandDigest || a.startId !== b.startId || a.runId !== b.runId || a.stepRunId !== b.stepRunId || a.projectId !== b.projectId) {
    bad('audit event binds another start');
  }
  // The audit event repeats what it allowed; the barrier must name the same admission, Policy
  // fence, audit contract and business time, or the evidence and the barrier disagree.
  if (
    a.actionDigest !== b.admission.actionDigest ||
    a.admissionDigest !== b.admission.admissionDigest ||
    !isDeepStrictEqual(a.policyFence, b.admission.policyFence) ||
    !isDeepStrictEqual(a.auditContract, b.contracts.audit) ||
    a.occurredAtMs !== b.requestedAtMs
  ) {
    bad('audit event allowed another admission than the barrier names');
  }

  const tr = trace.data;
  if (traceDigestOf(tr) !== tr.traceDigest) bad('trace digest does not match its content');
  if (tr.traceId !== b.trace.traceId || tr.spanId !== b.trace.spanId || tr.traceDigest !== b.trace.traceDigest) bad('trace anchor does not match the barrier');
  if (tr.traceparent !== b.trace.traceparent) bad('trace anchor carries another traceparent than the barrier');
  if (tr.w3cTraceId !== b.trace.w3cTraceId) bad('trace anchor names another W3C trace than the barrier');
  if (tr.commandDigest !== b.commandDigest || tr.startId !== b.startId) bad('trace anchor binds another start');

  const r = receipt.data;
  if (receiptDigestOf(r) !== r.receiptDigest) bad('audit receipt digest does not match its content');
  if (r.auditReceiptId !== b.audit.auditReceiptId || r.receiptDigest !== b.audit.auditReceiptDigest) bad('audit receipt does not match the barrier');
  if (r.auditEventDigest !== a.auditEventDigest || r.traceDigest !== tr.traceDigest || r.startId !== b.startId) bad('audit receipt binds other evidence');

  const m: EventOf<'StepRunStarted'>['data'] = started.data;
  if (mutationDigestOf(m) !== m.mutationDigest) bad('mutation digest does not match its content');
  if (m.mutationId !== b.mutation.mutationId || m.mutationDigest !== b.mutation.mutationDigest) bad('mutation does not match the barrier');
  if (m.runEventId !== b.runEvent.runEventId || m.runEventSequence !== b.runEvent.runEventSequence) bad('RunEvent does not match the barrier');
  if (!startedMatchesAttempt(m, b)) bad('StepRun mutation does not match the barrier');
  const startedDigest = startedStepRunDigestOf(b);
  if (startedDigest !== b.attempt.startedStepRunDigest) bad('started StepRun digest does not recompute from the barrier');

  if (committed.data.barrierDigest !== sealed.barrierDigest || !isDeepStrictEqual(committed.data.barrier, b)) {
    bad('barrier event does not match the barrier record');
  }
};
