import { CorruptRecordError, streamNameOf } from '../../domain';
import type { StartOutcome } from '../../domain/records';
import { attemptValue } from '../../projections/rows';
import { verifyOutcomeRow } from '../../projections/outcomeRows';
import { decodeRunRow, decodeStepRunRow } from '../../projections/runState';
import { checkSealedSpan } from '../eventSeals';
import { attemptMismatch, outcomeOf } from './agreement';
import { PAGE, problemOf, type VerifyRun } from './verifyRun';

// `verify`'s walks over the stored records, a page at a time (R5.3, R9.2): every barrier with
// its facts, every outcome row, Run and StepRun head; each damaged record is a problem, and
// what each walk saw is kept for the comparisons with the log (verifyLog.ts).

/** Every barrier and its facts (R5.3), and whether its StepRun agrees with its outcome. */
export const walkBarriers = (run: VerifyRun): Promise<void> =>
  run.walk('barrier', 'barriers', async () => {
    for (let after = ''; ; ) {
      const ids = await run.snapshot(async (v) => {
        const page = await v.barrierIdsAfter(after, PAGE);
        for (const startId of page) {
          run.storedBarriers.add(startId);
          try {
            const barrier = await v.readBarrier(startId);
            if (barrier === null) throw new CorruptRecordError('start barrier', startId, 'listed but unreadable');
            let outcome: StartOutcome | null = null;
            try {
              outcome = await outcomeOf(v, startId, run.keys);
            } catch (e) {
              run.problems.push(problemOf('outcome', startId, e));
              continue;
            }
            const mismatch = await attemptMismatch(v, barrier, outcome);
            if (mismatch !== undefined) run.problems.push({ kind: 'in_doubt_mismatch', record: startId, problem: mismatch });
          } catch (e) {
            run.problems.push(problemOf('barrier', startId, e));
          }
        }
        return page;
      });
      if (ids.length === 0) break;
      after = ids[ids.length - 1]!;
      run.checked.barriers += ids.length;
      run.progress.tick('barriers', ids.length);
    }
  });

/** Every outcome row against its event (a row whose barrier is gone is caught by the FK check). */
export const walkOutcomes = (run: VerifyRun): Promise<void> =>
  run.walk('outcome', 'outcomes', async () => {
    for (let after = ''; ; ) {
      const rows = await run.snapshot(async (v) => {
        const page = await v.outcomeRowsAfter(after, PAGE);
        for (const row of page) {
          run.storedOutcomeEvents.add(row.event_id);
          try {
            verifyOutcomeRow(row, await v.eventById(row.event_id));
            // the outcome event's seal is the stream pass's finding, reported once there
          } catch (e) {
            run.problems.push(problemOf('outcome', row.start_id, e));
          }
        }
        return page;
      });
      if (rows.length === 0) break;
      after = rows[rows.length - 1]!.start_id;
      run.checked.outcomes += rows.length;
      run.progress.tick('outcomes', rows.length);
    }
  });

/** Every Run head decodes; keyed (R9.4), every event of its stream is sealed, or legacy. */
export const walkRuns = (run: VerifyRun): Promise<void> =>
  run.walk('run', 'runs', async () => {
    for (let after = ''; ; ) {
      const rows = await run.snapshot(async (v) => {
        const page = await v.runRowsAfter(after, PAGE);
        for (const row of page) {
          run.storedRuns.add(row.run_id);
          try {
            decodeRunRow(row, row.stream_version);
          } catch (e) {
            run.problems.push(problemOf('run', row.run_id, e));
          }
          if (run.keys !== undefined) {
            // R9.4: every event of the stream sealed, or legacy (before the seal origin)
            const stream = streamNameOf(row.run_id);
            const to = row.stream_version === null ? Number.MAX_SAFE_INTEGER : Number(row.stream_version);
            const found = checkSealedSpan(run.keys, stream, await v.sealedSpan(stream, 1, to), 1, to);
            for (const f of found.findings) run.problems.push({ kind: 'event_seal', ...f });
            run.seals.sealed += found.sealed;
            run.seals.legacy += found.legacy;
          }
        }
        return page;
      });
      if (rows.length === 0) break;
      after = rows[rows.length - 1]!.run_id;
      run.checked.runs += rows.length;
      run.progress.tick('runs', rows.length);
    }
  });

/** Every StepRun row decodes, and none is running without the barrier of its attempt. */
export const walkStepRuns = (run: VerifyRun): Promise<void> =>
  run.walk('step_run', 'step_runs', async () => {
    for (let after: readonly [string, string] = ['', '']; ; ) {
      const rows = await run.snapshot(async (v) => {
        const page = await v.stepRunRowsAfter(after, PAGE);
        for (const row of page) {
          const where = `${row.run_id}/${row.step_run_id}`;
          run.storedStepRuns.set(where, row.run_id);
          try {
            const s = decodeStepRunRow(row);
            if (s.status !== 'running') continue;
            const key = attemptValue(s.runId, s.stepRunId, s.version);
            const ids = [...new Set(await v.identityStartIds('attempt', key, { runId: s.runId, stepRunId: s.stepRunId, startedStepRunVersion: s.version }))];
            if (ids.length !== 1 || ids[0] !== s.lastStartId) {
              run.problems.push({
                kind: 'running_without_barrier',
                record: where,
                problem: `StepRun is running at version ${s.version} (start ${s.lastStartId ?? '(none)'}) but its attempt has ${ids.length === 0 ? 'no barrier' : `barrier(s) ${ids.join(', ')}`}`,
              });
            }
          } catch (e) {
            run.problems.push(problemOf('step_run', where, e));
          }
        }
        return page;
      });
      if (rows.length === 0) break;
      const last = rows[rows.length - 1]!;
      after = [last.run_id, last.step_run_id];
      run.checked.stepRuns += rows.length;
      run.progress.tick('step_runs', rows.length);
    }
  });
