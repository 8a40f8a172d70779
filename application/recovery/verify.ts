import { ValidationError, type ValidationReason } from '../../domain';
import type { VerifyProblem } from '../../domain/records';
import type { RecoveryApi } from '../authority';
import type { VerifyProgressListener } from '../verifyProgress';
import { compareWithLog, walkEvents, walkInDoubtIndex, walkNotes, walkPlans } from './verifyLog';
import { walkBarriers, walkOutcomes, walkRuns, walkStepRuns } from './verifyRecords';
import { VerifyRun } from './verifyRun';
import type { RecoveryBackend } from './view';

// `recovery.verify`: every stored record re-verified, and everything derived derived again
// from the log and compared (R5.3, R9.2). It never throws for damage: each walk a damaged
// store cuts short is reported, and the next walk runs.

/**
 * `verify`'s options: a progress listener or nothing, checked before the walk (a bad listener
 * would fail deep inside it). By hand: the codecs take JSON data, and a listener is a function.
 */
const checkedVerifyOptions = (options: unknown): { onProgress?: VerifyProgressListener } => {
  const refuse = (path: string, reason: ValidationReason, message: string) => new ValidationError('verify options', [{ path, reason, message }]);
  if (options === undefined) return {};
  if (typeof options !== 'object' || options === null || Array.isArray(options)) throw refuse('(root)', 'invalid_value', 'expected an object');
  for (const key of Object.keys(options)) if (key !== 'onProgress') throw refuse(key, 'unknown_field', `unknown field "${key}" (rejected, not stripped)`);
  const { onProgress } = options as { onProgress?: unknown };
  if (onProgress !== undefined && typeof onProgress !== 'function') throw refuse('onProgress', 'invalid_value', 'expected a function');
  return onProgress === undefined ? {} : { onProgress: onProgress as VerifyProgressListener };
};

/** verify's finding for an audit event, trace anchor or receipt row its start does not stand behind (either backend's integrity query). */
export const evidenceProblemOf = (r: { table_name: string; record_id: string; start_id: string; has_move: unknown; has_barrier: unknown }): VerifyProblem => {
  const lacks = [r.has_move ? undefined : 'its start has no StepRun move', r.has_barrier ? undefined : "its start's barrier does not name it"].filter((x) => x !== undefined);
  return { kind: 'evidence_without_move', record: `${r.table_name} ${r.record_id}`, problem: `evidence of start ${r.start_id}, but ${lacks.join(' and ')}` };
};

export const verifyOperation =
  (backend: RecoveryBackend): RecoveryApi['verify'] =>
  async (options = {}) => {
    const { onProgress } = checkedVerifyOptions(options);
    // The walks are compared with each other, so they read one snapshot: a start committed
    // between two of them would otherwise be a difference.
    const run = await backend.verifySession(async (session) => {
      const run = await VerifyRun.open(backend, session, onProgress);
      await walkBarriers(run);
      await walkOutcomes(run);
      await walkRuns(run);
      await walkStepRuns(run);
      await walkEvents(run);
      compareWithLog(run);
      await walkInDoubtIndex(run);
      await walkNotes(run);
      run.progress.integrity(false);
      await run.walk('schema', 'integrity checks', async () => void run.problems.push(...(await run.snapshot((v) => v.integrityProblems()))));
      return run;
    });
    // a plan is written in its start's transaction, and audited against its barrier alone
    const plans = await walkPlans(run);
    run.progress.integrity(true);
    const { problems, warnings, checked, notes, seals, keys } = run;
    return { ok: problems.length === 0, checked, notes, ...(keys === undefined ? {} : { seals }), ...(plans === undefined ? {} : { plans }), problems, warnings };
  };
