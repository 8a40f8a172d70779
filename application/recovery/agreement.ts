import { CorruptRecordError, PreconditionError, streamNameOf } from '../../domain';
import type { StartOutcome, StoredBarrier } from '../../domain/records';
import { attemptValue, type StepRunRow } from '../../projections/rows';
import { verifyOutcomeRow } from '../../projections/outcomeRows';
import { decodeStepRunRow } from '../../projections/runState';
import { agreedStreamVersion, checkedChain } from '../checks/readChecks';
import { requireSealedSpan } from '../eventSeals';
import type { EvidenceKeyring } from '../evidenceKeys';
import type { RecoveryView } from './view';

// R9.3, the rule every recovery answer shares: it is built only from records that agree with
// each other (a barrier, its outcome fact, its StepRun, its Run's heads); a disagreement fails
// the answer closed and never becomes "in doubt", "no outcome" or "nothing to do".

/**
 * The outcome fact of one start, verified against its event, or null while in doubt. With a
 * keyring the event must also carry the deployment key's seal (R9.4): an outcome appended by
 * INSERT rights alone fails closed.
 */
export const outcomeOf = async (v: RecoveryView, startId: string, keys: EvidenceKeyring | undefined): Promise<StartOutcome | null> => {
  const rows = await v.outcomeRows(startId);
  if (rows.length > 1) throw new CorruptRecordError('start outcome', startId, `${rows.length} outcome rows for one start`);
  const row = rows[0];
  if (row === undefined) return null;
  const event = await v.eventById(row.event_id);
  const outcome = verifyOutcomeRow(row, event);
  // R9.2: the outcome is read from its event, so that event must still be the one its chain binds
  if (event?.chain_digest !== undefined) checkedChain(event.stream_id, event.previous_chain ?? '', [{ ...event, global_position: 0 }]);
  if (keys !== undefined && event !== undefined) {
    const p = Number(event.stream_position);
    requireSealedSpan(keys, event.stream_id, await v.sealedSpan(event.stream_id, p, p), p, p);
  }
  return outcome;
};

/** R9.3: no barrier under a start id is an answer only if no outcome row names that start either (one probe, on that path only). */
export const barrierOrNone = async (v: RecoveryView, startId: string): Promise<StoredBarrier | null> => {
  const b = await v.readBarrier(startId);
  if (b === null && (await v.outcomeRows(startId)).length > 0) throw new CorruptRecordError('start outcome', startId, 'an outcome row names this start but no barrier holds it');
  return b;
};

const requireBarrier = async (v: RecoveryView, startId: string): Promise<StoredBarrier> => {
  const b = await barrierOrNone(v, startId);
  if (b === null) throw new PreconditionError('start_not_found', `no start barrier has startId ${startId}`);
  return b;
};

/**
 * A barrier and its StepRun must agree on whether the attempt is still open: no outcome fact
 * <=> the StepRun is running this very attempt. Returns the disagreement, if any.
 */
export const attemptMismatch = async (v: RecoveryView, barrier: StoredBarrier, outcome: StartOutcome | null): Promise<string | undefined> => {
  const b = barrier.record;
  const row = await v.stepRunRow(b.runId, b.stepRunId);
  if (row === undefined) return `its StepRun ${b.runId}/${b.stepRunId} is missing`;
  const s = decodeStepRunRow(row);
  const runsThisAttempt = s.status === 'running' && s.version === b.attempt.startedStepRunVersion && s.lastStartId === b.startId;
  if (outcome === null && !runsThisAttempt) {
    return `no outcome fact, but its StepRun is ${s.status} at version ${s.version} (attempt ${b.attempt.startedStepRunVersion})`;
  }
  if (outcome !== null) {
    if (runsThisAttempt) return `outcome ${outcome.outcome} is recorded, but its StepRun still runs this attempt`;
    if (outcome.stepRunVersion !== b.attempt.startedStepRunVersion + 1) {
      return `outcome moved the StepRun to version ${outcome.stepRunVersion}, expected ${b.attempt.startedStepRunVersion + 1}`;
    }
    if (s.version < outcome.stepRunVersion) return `StepRun is at version ${s.version}, behind its outcome (${outcome.stepRunVersion})`;
  }
  return undefined;
};

/**
 * R9.3: an answer about a Run's starts is given only while its heads agree with its log. Both Run
 * heads set back together over an intact log agree with each other, not with the StepRun heads
 * and barriers or with where the log ends (agreedStreamVersion): one statement, constant cost.
 */
export const requireRunHeadsAgree = async (v: RecoveryView, runId: string): Promise<void> => {
  agreedStreamVersion(streamNameOf(runId), await v.runHeads(runId));
};

/** R9.3: a recovery answer is built only from a barrier and a StepRun that agree. */
export const requireAgreement = async (v: RecoveryView, barrier: StoredBarrier, outcome: StartOutcome | null): Promise<void> => {
  const mismatch = await attemptMismatch(v, barrier, outcome);
  if (mismatch !== undefined) throw new CorruptRecordError('start outcome', barrier.record.startId, mismatch);
};

/**
 * R9.3: a start's barrier and outcome fact, answered only when they agree with its StepRun: a
 * finished StepRun whose outcome row is gone fails closed, never "no outcome", "no note", an
 * orphan to purge or a resolution to make.
 */
export const agreedOutcomeOf = async (v: RecoveryView, startId: string, keys: EvidenceKeyring | undefined): Promise<{ barrier: StoredBarrier; outcome: StartOutcome | null }> => {
  const barrier = await requireBarrier(v, startId);
  await requireRunHeadsAgree(v, barrier.record.runId);
  const outcome = await outcomeOf(v, startId, keys);
  await requireAgreement(v, barrier, outcome);
  return { barrier, outcome };
};

/**
 * R9.3: a running StepRun is an open attempt, so its barrier must exist and be the one the
 * StepRun names; otherwise in-doubt and history would list nothing for a start that ran.
 * Both sides are looked up: the replay index and the barrier's own attempt columns.
 */
export const requireBarrierOfRunning = async (v: RecoveryView, row: StepRunRow, keys: EvidenceKeyring | undefined): Promise<string> => {
  const s = decodeStepRunRow(row);
  const where = `${s.runId}/${s.stepRunId}`;
  const attempt = { runId: s.runId, stepRunId: s.stepRunId, startedStepRunVersion: s.version };
  const ids = [...new Set(await v.identityStartIds('attempt', attemptValue(s.runId, s.stepRunId, s.version), attempt))];
  const startId = ids[0];
  if (ids.length !== 1 || startId === undefined || startId !== s.lastStartId) {
    throw new CorruptRecordError(
      'step run',
      where,
      `running at version ${s.version} (start ${s.lastStartId ?? '(none)'}) but its attempt has ${ids.length === 0 ? 'no barrier' : `barrier(s) ${ids.join(', ')}`}`,
    );
  }
  const barrier = await v.readBarrier(startId);
  if (barrier === null) throw new CorruptRecordError('step run', where, `running, but the barrier of start ${startId} is missing`);
  await requireAgreement(v, barrier, await outcomeOf(v, startId, keys));
  return startId;
};
