import { CorruptRecordError, decodeLookup, replayKeysOfBarrier, type ReplayIdentity, type StartBarrierRecord } from '../../domain';
import { attemptValue, replayValuesOf } from '../../projections/rows';
import { requireAttemptNotInLog } from '../checks/readChecks';
import type { RecoveryApi } from '../authority';
import { barrierOrNone } from './agreement';
import type { RecoveryBackend } from './view';

// `recovery.lookup`: the one barrier an R4.1 identity names, or null only when nothing else in
// the store says that start exists (R9.3); several is corruption and fails closed.

/** The event id a start's fact is logged under, by the identity it holds (the ids the event trigger requires). */
const LOGGED_AS: Partial<Record<ReplayIdentity, { readonly id: (value: string) => string; readonly type: string }>> = {
  traceId: { id: (v) => `trace:${v}`, type: 'TraceAnchorRecorded' },
  auditEventId: { id: (v) => `audit:${v}`, type: 'SecurityAuditEventRecorded' },
  auditReceiptId: { id: (v) => `receipt:${v}`, type: 'AuditReceiptIssued' },
  runEventId: { id: (v) => v, type: 'StepRunStarted' },
};

const identityValueOf = (b: StartBarrierRecord, identity: ReplayIdentity): string => replayValuesOf(replayKeysOfBarrier(b))[identity];

export const lookupOperation =
  (backend: RecoveryBackend): RecoveryApi['lookup'] =>
  async (identity, value) => {
    const request = decodeLookup(identity, value);
    const key =
      request.identity === 'attempt'
        ? attemptValue(request.value.runId, request.value.stepRunId, request.value.startedStepRunVersion)
        : request.value;
    return backend.snapshot(async (v) => {
      const ids = await v.identityStartIds(request.identity, key, request.identity === 'attempt' ? request.value : undefined);
      const distinct = [...new Set(ids)];
      if (distinct.length > 1) {
        throw new CorruptRecordError('replay index', key, `${request.identity} names ${distinct.length} barriers (${distinct.join(', ')})`);
      }
      const startId = distinct[0];
      if (startId === undefined) {
        // Null only if nothing else says the start exists (R9.3): for a start id, the barrier
        // read's own check (index, mutation and outcome rows); for an attempt, the Run's log.
        if (request.identity === 'startId') return barrierOrNone(v, key);
        if (request.identity === 'attempt') {
          const a = request.value;
          return requireAttemptNotInLog(key, a.stepRunId, a.startedStepRunVersion, await v.stepRunStartedRows(a.runId));
        }
        // for a fact's id, that fact's own event in the log (its event id names it: one probe)
        const logged = LOGGED_AS[request.identity];
        if (logged !== undefined && (await v.eventById(logged.id(key)))?.event_type === logged.type) {
          throw new CorruptRecordError('replay index', key, `the Run's log holds the event of this ${request.identity}, but no index or fact row names it`);
        }
        return null;
      }
      const barrier = await v.readBarrier(startId);
      if (barrier === null) throw new CorruptRecordError('replay index', key, `${request.identity} names start ${startId}, which has no barrier`);
      if (identityValueOf(barrier.record, request.identity) !== key) {
        throw new CorruptRecordError('replay index', key, `${request.identity} names start ${startId}, whose barrier binds another value`);
      }
      return barrier;
    });
  };
