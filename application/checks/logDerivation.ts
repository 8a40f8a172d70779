import { CorruptRecordError, evolve, initialRunState, type RunState, type RunStreamEvent } from '../../domain';
import type { VerifyProblem } from '../../domain/records';
import { eventChainDigest } from '../../domain/eventChain';
import { runRowOf, stepRunRowOf, type RunRow, type StepRunRow } from '../../projections/rows';
import { decodeEventRow, type EventRow } from '../../domain/eventRows';
import { MOVES_FROM, OUTCOME_EVENTS } from '../../domain/stepRunMoves';

// R9.2 `verify`: everything derived, derived again from the event log alone, one event at a
// time, then compared with what is stored: the chain link of every event row, stream positions
// without gaps, and the stream, Run and StepRun heads; and which outcome and barrier rows the
// log says must exist. The log is read in stream order, so one stream's fold is held at a time
// and compared when the stream ends: memory stays flat at any store size. That the global
// order follows each stream is the backend's integrity check.

/** An event row as `verify` pages it; `chain_digest` is absent on a backend without a chain. */
export type LoggedEventRow = EventRow & { readonly chain_digest?: string | null };

interface StreamFold {
  position: number;
  chain: string;
  /** null once an event of the stream could not be folded: its heads are not compared. */
  state: RunState | null;
}

/** What is illegal about this StepRun move in the folded state, if anything (the database's own check, R9.1, done again). */
const illegalMove = (state: RunState, event: RunStreamEvent): string | undefined => {
  const from = MOVES_FROM[event.type];
  if (from === undefined || !('stepRunId' in event.data)) return undefined;
  const d = event.data as { stepRunId: string; stepRunVersion: number; startId?: string };
  const s = state.stepRuns[d.stepRunId];
  if (s === undefined) return `${event.type} of StepRun ${d.stepRunId} that the log never created`;
  if (!from.includes(s.status)) return `${event.type} moves StepRun ${d.stepRunId} from ${s.status}, which the lifecycle does not allow`;
  if (d.stepRunVersion !== s.version + 1) return `${event.type} moves StepRun ${d.stepRunId} to version ${d.stepRunVersion} from ${s.version}`;
  if (s.status === 'running' && d.startId !== s.lastStartId) return `${event.type} names start ${d.startId ?? '(none)'}, but StepRun ${d.stepRunId} runs ${s.lastStartId ?? '(none)'}`;
  return undefined;
};

const differences = (stored: Readonly<Record<string, unknown>>, derived: Readonly<Record<string, unknown>>): string[] =>
  Object.keys(derived).filter((k) => String(stored[k]) !== String(derived[k])).map((k) => `${k} is ${JSON.stringify(stored[k])}, the log says ${JSON.stringify(derived[k])}`);

/** A stream whose last event has been folded: its heads can be compared with the stored ones. */
export interface FinishedStream {
  readonly stream: string;
  /** The Run the stream derives; undefined when it derives none or could not be folded. */
  readonly runId: string | undefined;
  readonly fold: StreamFold;
}

export class LogDerivation {
  private current: { stream: string; fold: StreamFold } | undefined;
  /** Event ids of outcome events: each must have its start_outcomes row. */
  readonly outcomeEventIds = new Set<string>();
  /** Start ids of barrier events: each must have its barrier row. */
  readonly barrierStartIds = new Set<string>();
  /** The starts the log commits and records no outcome for: what the in-doubt index must hold. */
  readonly inDoubt = new Map<string, { readonly projectId: string; readonly runId: string; readonly committedAtMs: number }>();
  /** Run ids of streams that could not be folded: their heads are not compared either way. */
  readonly undecidableRuns = new Set<string>();

  /**
   * Folds one row, given in stream order; returns what is wrong with it (its link, its
   * position, its fold), and the stream before it when this row starts another. `decoded` is
   * the row's event as the caller already decoded it, or null when that failed (the caller
   * reports why); the row is decoded here only when it is not given.
   */
  add(row: LoggedEventRow, decoded?: RunStreamEvent | null): { problems: VerifyProblem[]; finished?: FinishedStream } {
    const where = `${row.stream_id}@${row.stream_position}`;
    const problems: VerifyProblem[] = [];
    const finished = this.current !== undefined && this.current.stream !== row.stream_id ? this.finish() : undefined;
    this.current ??= { stream: row.stream_id, fold: { position: 0, chain: '', state: initialRunState() } };
    const fold = this.current.fold;
    const position = Number(row.stream_position);
    if (position !== fold.position + 1) {
      problems.push({ kind: 'event', record: where, problem: `stream position ${position} follows ${fold.position}: the log has a gap or is out of order` });
      fold.state = null;
    }
    if (row.chain_digest !== undefined) {
      const link = eventChainDigest(fold.chain, row);
      if (row.chain_digest !== link) problems.push({ kind: 'chain', record: where, problem: 'chain digest does not bind this row to the one before it: a cell of this row or of its predecessor was changed' });
      fold.chain = row.chain_digest ?? link; // each broken link is reported once, where it breaks
    }
    fold.position = position;
    try {
      if (decoded === null) throw new CorruptRecordError('event', where, 'does not decode');
      const event = decoded ?? decodeEventRow(row);
      if (OUTCOME_EVENTS.includes(event.type)) {
        this.outcomeEventIds.add(row.event_id);
        if ('startId' in event.data && typeof event.data.startId === 'string') this.inDoubt.delete(event.data.startId);
      }
      if (event.type === 'ToolExecutionStartBarrierCommitted') {
        const b = event.data.barrier;
        this.barrierStartIds.add(b.startId);
        this.inDoubt.set(b.startId, { projectId: b.projectId, runId: b.runId, committedAtMs: Number(row.committed_at_ms) });
      }
      if (fold.state !== null) {
        const illegal = illegalMove(fold.state, event);
        if (illegal !== undefined) problems.push({ kind: 'event', record: where, problem: `illegal history: ${illegal}` });
        fold.state = evolve(fold.state, event);
      }
    } catch (e) {
      // decoding problems are reported by the event check itself; the stream's heads can no longer be derived
      if (fold.state !== null && !(e instanceof CorruptRecordError)) {
        problems.push({ kind: 'event', record: where, problem: `cannot be applied to its stream: ${e instanceof Error ? e.message : String(e)}` });
      }
      fold.state = null;
    }
    return finished === undefined ? { problems } : { problems, finished };
  }

  /** The stream being folded, finished (at the end of the log), or undefined when there is none. */
  finish(): FinishedStream | undefined {
    const c = this.current;
    if (c === undefined) return undefined;
    this.current = undefined;
    if (c.fold.state === null) this.undecidableRuns.add(c.stream.slice('run-'.length));
    return { stream: c.stream, runId: c.fold.state?.run?.runId, fold: c.fold };
  }
}

/**
 * The heads one finished stream derives against the stored ones; returns the problems and the
 * StepRun keys (`run/step`) it derived, which the caller crosses off what is stored.
 */
export const compareStreamHeads = (
  finished: FinishedStream,
  storedRun: (RunRow & { stream_version: number | string | null }) | undefined,
  storedStepRuns: readonly StepRunRow[],
): { problems: VerifyProblem[]; derivedStepKeys: string[] } => {
  const problems: VerifyProblem[] = [];
  const derivedStepKeys: string[] = [];
  const state = finished.fold.state;
  if (state === null || state.run === null) return { problems, derivedStepKeys };
  const run = runRowOf(state.run);
  if (storedRun === undefined) {
    problems.push({ kind: 'head', record: run.run_id, problem: `stream ${finished.stream} has events but the Run head is missing` });
  } else {
    const diff = differences(storedRun as unknown as Record<string, unknown>, { ...run, stream_version: run.version });
    if (diff.length > 0) problems.push({ kind: 'head', record: run.run_id, problem: `the Run head is not what its log derives: ${diff.join('; ')}` });
  }
  const stored = new Map(storedStepRuns.map((r) => [`${r.run_id}/${r.step_run_id}`, r]));
  for (const s of Object.values(state.stepRuns)) {
    const derived = stepRunRowOf(s);
    const key = `${derived.run_id}/${derived.step_run_id}`;
    derivedStepKeys.push(key);
    const storedStep = stored.get(key);
    if (storedStep === undefined) {
      problems.push({ kind: 'head', record: key, problem: 'the log creates this StepRun but its head is missing' });
      continue;
    }
    const diff = differences(storedStep as unknown as Record<string, unknown>, derived as unknown as Record<string, unknown>);
    if (diff.length > 0) problems.push({ kind: 'head', record: key, problem: `the StepRun head is not what its log derives: ${diff.join('; ')}` });
  }
  return { problems, derivedStepKeys };
};
