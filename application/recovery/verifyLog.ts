import { CorruptRecordError, isOutcomeEventType } from '../../domain';
import { checkEventRow } from '../../domain/eventRows';
import type { VerifyProblem } from '../../domain/records';
import { compareStreamHeads, type FinishedStream } from '../checks/logDerivation';
import { noteOf, purgeProblemOf } from './notes';
import type { RecoveryView } from './view';
import { PAGE, problemOf, type VerifyRun } from './verifyRun';

// `verify` against the log (R9.2): every event decoded and each stream folded whole, then every
// head and read model compared with what the log derives, both ways; the notes its outcomes
// bind (R10.2) and the sealed plans (R12.2).

/** The stored heads of a stream the log has finished, against what it derives (R9.2). */
const headProblems = async (run: VerifyRun, v: RecoveryView, finished: FinishedStream | undefined): Promise<VerifyProblem[]> => {
  if (finished?.runId === undefined) return [];
  const stored = await v.headsOfRun(finished.runId);
  const found = compareStreamHeads(finished, stored.run, stored.stepRuns);
  run.storedRuns.delete(finished.runId);
  for (const key of found.derivedStepKeys) run.storedStepRuns.delete(key);
  return found.problems;
};

/** Every event of the log decodes strictly and is stored canonically; each stream is folded whole. */
export const walkEvents = (run: VerifyRun): Promise<void> =>
  run.walk('event', 'events', async () => {
    for (let after: readonly [string, number] = ['', 0]; ; ) {
      const rows = await run.snapshot(async (v) => {
        const page = await v.eventRowsByStreamAfter(after, PAGE);
        for (const row of page) {
          let e: ReturnType<typeof checkEventRow> | null = null;
          try {
            e = checkEventRow(row);
            // R10.2: a note an outcome binds must be there, as text that matches, or purged
            if (isOutcomeEventType(e.type) && 'resolution' in e.data && e.data.resolution.noteDigest !== undefined) {
              const { startId, resolution } = e.data as { startId: string; resolution: { noteDigest: string } };
              run.boundNotes.add(`${startId}\u0000${resolution.noteDigest}`);
              const n = noteOf(startId, resolution.noteDigest, await run.noteReads.rows(startId));
              if (n.status === 'purged') run.notes.purged++;
              else run.notes.present++;
            }
          } catch (err) {
            run.problems.push(problemOf('event', `${row.stream_id}@${row.stream_position}`, err));
          }
          // decoded once: the fold takes this decoding, or its failure
          const folded = run.log.add(row, e);
          run.problems.push(...folded.problems);
          run.problems.push(...(await headProblems(run, v, folded.finished)));
        }
        if (page.length === 0) run.problems.push(...(await headProblems(run, v, run.log.finish())));
        return page;
      });
      if (rows.length === 0) break;
      const last = rows[rows.length - 1]!;
      after = [last.stream_id, Number(last.stream_position)];
      run.checked.events += rows.length;
      run.progress.tick('events', rows.length);
    }
  });

/**
 * Every head and read model against the log (R9.2), both ways: what no stream derived. Only
 * between walks that reached their end: a walk cut short would list what it never read.
 */
export const compareWithLog = (run: VerifyRun): void => {
  if (run.whole('runs')) for (const runId of run.storedRuns) {
    if (!run.log.undecidableRuns.has(runId)) run.problems.push({ kind: 'head', record: runId, problem: 'a Run head without a RunCreated in the log' });
  }
  if (run.whole('step_runs')) for (const [key, runId] of run.storedStepRuns) {
    if (!run.log.undecidableRuns.has(runId)) run.problems.push({ kind: 'head', record: key, problem: 'a StepRun head without its StepRunCreated in the log' });
  }
  if (run.whole('barriers')) for (const id of run.log.barrierStartIds) {
    if (!run.storedBarriers.has(id)) run.problems.push({ kind: 'head', record: id, problem: 'the log commits this start but its barrier row is missing' });
  }
  if (run.whole('barriers')) for (const id of run.storedBarriers) {
    if (!run.log.barrierStartIds.has(id)) run.problems.push({ kind: 'head', record: id, problem: 'a barrier row without its ToolExecutionStartBarrierCommitted in the log' });
  }
  if (run.whole('outcomes')) for (const id of run.log.outcomeEventIds) {
    if (!run.storedOutcomeEvents.has(id)) run.problems.push({ kind: 'head', record: id, problem: 'the log records this outcome event but its start_outcomes row is missing' });
  }
};

/** The in-doubt index (a read model the listing pages through) against the log, both ways. */
export const walkInDoubtIndex = async (run: VerifyRun): Promise<void> => {
  const indexed = new Set<string>();
  await run.walk('head', 'in_doubt_starts', async () => {
    for (let after = ''; ; ) {
      const rows = await run.snapshot((v) => v.inDoubtIndexRowsAfter(after, PAGE));
      for (const row of rows) {
        indexed.add(row.start_id);
        const derived = run.log.inDoubt.get(row.start_id);
        if (derived === undefined) {
          run.problems.push({ kind: 'head', record: row.start_id, problem: 'the in-doubt index lists this start, but the log does not commit it or records its outcome' });
        } else if (derived.projectId !== row.project_id || derived.runId !== row.run_id || derived.committedAtMs !== Number(row.committed_at_ms)) {
          run.problems.push({ kind: 'head', record: row.start_id, problem: "the in-doubt index row does not hold the Project, Run and commit time of the start's barrier event" });
        }
      }
      if (rows.length === 0) break;
      after = rows[rows.length - 1]!.start_id;
    }
  });
  if (run.whole('in_doubt_starts')) for (const [startId, d] of run.log.inDoubt) {
    if (!indexed.has(startId) && !run.log.undecidableRuns.has(d.runId)) run.problems.push({ kind: 'head', record: startId, problem: 'the log commits this start with no outcome, but the in-doubt index does not list it' });
  }
};

/**
 * R10.2: a note no outcome binds is an orphan of a resolve that stopped between its note
 * and its outcome event. It is not evidence and weakens none (nothing binds it), so it is
 * a warning, not a difference: verify stays ok. One that still holds text is listed, for
 * `purge-note`; a purged orphan (what a failed resolve leaves) is not.
 */
export const walkNotes = (run: VerifyRun): Promise<void> =>
  run.walk('note', 'resolution_notes', async () => {
    for (const row of await run.noteReads.all()) {
      const damaged = run.boundNotes.has(`${row.start_id}\u0000${row.note_digest}`) ? undefined : purgeProblemOf(row);
      if (damaged !== undefined) run.problems.push({ kind: 'note', record: row.start_id, problem: damaged });
      if (row.note_text === null || run.boundNotes.has(`${row.start_id}\u0000${row.note_digest}`)) continue;
      run.warnings.push({ kind: 'orphan_note', record: row.start_id, problem: `resolution note ${row.note_digest} is bound by no outcome and still holds text: purge it (purge-note)` });
    }
  });

/** R12.2: a plan is outside the evidence; shredded (or its key destroyed) is not damage, a changed one is. */
export const walkPlans = async (run: VerifyRun): Promise<{ sealed: number; shredded: number } | undefined> => {
  let plans: { sealed: number; shredded: number } | undefined;
  if (run.backend.plans !== undefined) {
    await run.walk('plan', 'invocation_plans', async () => {
      const audit = await run.backend.plans!()
        .audit(async (id) => (await run.backend.snapshot((v) => v.readBarrier(id)).catch(() => null))?.record.admission.planDigest)
        .catch((e: unknown) => {
          // a schema changed under the authority: the integrity walk below reports it once
          if (e instanceof CorruptRecordError && e.recordKind === 'schema') return { sealed: 0, shredded: 0, problems: [] };
          throw e;
        });
      // a store that never sealed a plan and holds no key reports nothing of plans
      if (run.backend.plans!().keyed || audit.sealed + audit.shredded + audit.problems.length > 0) plans = { sealed: audit.sealed, shredded: audit.shredded };
      for (const p of audit.problems) run.problems.push({ kind: 'plan', ...p });
    });
  }
  return plans;
};
