import { streamNameOf, type RunState, type StartFacts, type StartFactsJson } from '../domain';
import { naturalEventIdOf, startEventJsonOf, startRowsOf, startedStepRunRowOf, type StartRows, type StepRunRow } from '../projections/rows';
import type { StoredBarrier } from '../domain/records';
import type { InvocationPlanRow } from './invocationPlans';

// The write plan of one start: every row, every event row (with its stream position and id)
// and every compare-and-set expectation, derived once from the decided facts and the locked
// state. The backends only execute it, step by step, so the content and the order of R3.3 ..
// R3.7 live here and nowhere else.

/**
 * The clock a backend gives when its write stamps the transaction's clock itself (R3.10): the
 * rows carry this value until the server replaces it, and `writeStart` returns the real one.
 */
export const CLOCK_AT_WRITE = -1;

/** R3.3 .. R3.7, in the order they are written; the fault-injection hook fires after each. */
export const START_WRITE_STEPS = ['evidence', 'stepRunCas', 'runCas', 'runEvent', 'barrier'] as const;
export type StartWriteStep = (typeof START_WRITE_STEPS)[number];

/** One row of the event log, with its stream position and its deterministic id. */
export interface StartEventRow {
  readonly position: number;
  readonly eventId: string;
  readonly type: string;
  /** Canonical JSON of the event's data (computed once, shared with the fact rows). */
  readonly dataJson: string;
}

export interface StartWrite {
  readonly startId: string;
  readonly streamId: string;
  readonly runId: string;
  readonly stepRunId: string;
  /** The database clock of this transaction (R3.10): every row carries it. */
  readonly committedAtMs: number;
  readonly rows: StartRows;
  /** The events each step appends: three evidence facts, the RunEvent, the barrier event. */
  readonly events: { readonly evidence: readonly StartEventRow[]; readonly runEvent: readonly StartEventRow[]; readonly barrier: readonly StartEventRow[] };
  /** R3.4: the StepRun row moves from exactly this version, status and digest to `next`. */
  readonly stepRunCas: { readonly expected: { readonly version: number; readonly status: string; readonly digest: string }; readonly next: StepRunRow };
  /** R3.5: the Run and its stream head move from `expected` to `next` (the event sequence). */
  readonly runCas: { readonly expected: number; readonly next: number };
  /** What `prepare` returns once the plan has committed. */
  readonly result: StoredBarrier;
  /** R12.2: the start's sealed invocation plan, written with the barrier step, in the same transaction. */
  readonly invocationPlan?: InvocationPlanRow;
}

/** Builds the plan of a new start from its five facts and the Run state they were decided on. */
/** `json`: the canonical JSON the decider computed for these very facts (buildStartFactsWithJson), not serialised again. */
export const planStartWrite = (facts: StartFacts, before: RunState, committedAtMs: number, json?: StartFactsJson): StartWrite => {
  const [, , , started, committed] = facts;
  const head = before.run;
  const from = before.stepRuns[started.data.stepRunId];
  if (head === null || from === undefined) throw new Error(`start ${started.data.startId}: a write plan needs the locked Run and StepRun`);
  const rows = startRowsOf(facts, committedAtMs, json);
  const eventJson = startEventJsonOf(rows); // each fact canonicalised once, by the decider or in startRowsOf
  const events = facts.map(
    (event, i): StartEventRow => ({ position: head.version + i + 1, eventId: naturalEventIdOf(event)!, type: event.type, dataJson: eventJson[i]! }),
  );
  return {
    startId: started.data.startId,
    streamId: streamNameOf(head.runId),
    runId: started.data.runId,
    stepRunId: started.data.stepRunId,
    committedAtMs,
    rows,
    events: { evidence: events.slice(0, 3), runEvent: events.slice(3, 4), barrier: events.slice(4, 5) },
    stepRunCas: {
      expected: { version: from.version, status: from.status, digest: started.data.fromStepRunDigest },
      next: startedStepRunRowOf(from, started.data.stepRunVersion, started.data.startId, started.data.startedStepRunDigest),
    },
    runCas: { expected: head.version, next: head.version + facts.length },
    result: { record: committed.data.barrier, barrierDigest: committed.data.barrierDigest, committedAtMs },
  };
};
