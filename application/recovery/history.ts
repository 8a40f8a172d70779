import * as t from 'io-ts';
import { CorruptRecordError } from '../../domain';
import { Identity, decodeOrThrow } from '../../domain/codecs';
import { checkEventRow } from '../../domain/eventRows';
import type { AttemptHistoryEntry } from '../../domain/records';
import { decodeStepRunRow } from '../../projections/runState';
import { startsInLog } from '../checks/readChecks';
import type { RecoveryApi } from '../authority';
import type { EvidenceKeyring } from '../evidenceKeys';
import { outcomeOf, requireAgreement, requireBarrierOfRunning, requireRunHeadsAgree } from './agreement';
import type { RecoveryBackend, RecoveryView } from './view';

// `recovery.history`: every barrier of every version of one StepRun, in attempt order, with its
// outcome; the list is what the Run's log and the StepRun's head say it is (R9.3).

const attemptHistory = async (v: RecoveryView, keys: EvidenceKeyring | undefined, runId: string, stepRunId: string): Promise<AttemptHistoryEntry[]> => {
  await requireRunHeadsAgree(v, runId);
  const entries: AttemptHistoryEntry[] = [];
  for (const startId of await v.attemptStartIds(runId, stepRunId)) {
    const barrier = await v.readBarrier(startId);
    if (barrier === null) throw new CorruptRecordError('start barrier', startId, 'listed in the attempt history but unreadable');
    const attempt = barrier.record.attempt.startedStepRunVersion;
    const previous = entries[entries.length - 1];
    if (previous !== undefined && previous.attempt >= attempt) {
      throw new CorruptRecordError('attempt history', `${runId}/${stepRunId}`, `attempt ${attempt} is bound to more than one barrier or out of order`);
    }
    const outcome = await outcomeOf(v, startId, keys);
    await requireAgreement(v, barrier, outcome);
    entries.push({ attempt, barrier, outcome });
  }
  // R9.3: the log, not the barrier table, says how often this StepRun was started, and its
  // head names the last start: a barrier row deleted (or one added) fails the read, never
  // shortens (or lengthens) the list.
  const logged = startsInLog(await v.stepRunStartedRows(runId), stepRunId).map((s) => s.startId);
  const listed = entries.map((e) => e.barrier.record.startId);
  if (logged.length !== listed.length || logged.some((id, i) => id !== listed[i])) {
    throw new CorruptRecordError('attempt history', `${runId}/${stepRunId}`, `the Run's log starts it ${logged.length} time(s) (${logged.join(', ') || 'never'}) but its barriers name ${listed.join(', ') || 'none'}`);
  }
  const row = await v.stepRunRow(runId, stepRunId);
  if (row === undefined && listed.length === 0 && (await v.stepRunCreatedRows(runId)).some((e) => (checkEventRow(e).data as { stepRunId?: string }).stepRunId === stepRunId)) {
    throw new CorruptRecordError('attempt history', `${runId}/${stepRunId}`, "the Run's log creates this StepRun but its head row is missing");
  }
  const last = row === undefined ? undefined : decodeStepRunRow(row).lastStartId;
  if (last !== listed[listed.length - 1]) {
    throw new CorruptRecordError('attempt history', `${runId}/${stepRunId}`, `its StepRun ${row === undefined ? 'is missing' : `names ${last ?? 'no start'} as its last start`} but the history ends at ${listed[listed.length - 1] ?? 'no start'}`);
  }
  // The running attempt is the head's last start, so the check above put it in the list.
  if (row !== undefined && row.status === 'running') await requireBarrierOfRunning(v, row, keys);
  return entries;
};

export const historyOperation =
  (backend: RecoveryBackend): RecoveryApi['history'] =>
  async (runId, stepRunId) => {
    const r = decodeOrThrow(t.tuple([Identity, Identity]), 'history request', [runId, stepRunId]);
    return backend.snapshot((v) => attemptHistory(v, backend.keyring?.(), r[0], r[1]));
  };
