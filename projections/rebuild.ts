import {
  START_FACT_TYPES,
  evolve,
  initialRunState,
  type RunState,
  type RunStreamEvent,
  type StartFacts,
} from '../domain';
import { runRowOf, startRowsOf, stepRunRowOf, type StartRows, type RunRow, type StepRunRow, type ReplayIdentityRow } from './rows';
import { type EventRow, checkEventRow } from '../domain/eventRows';

// Rebuild every inline projection from the event log alone. Specs compare the result with the
// stored tables (the projections are exactly a function of the log); operators can use it to
// recreate a damaged read model.

export interface RebuiltProjections {
  runs: RunRow[];
  stepRuns: StepRunRow[];
  audit: StartRows['audit'][];
  trace: StartRows['trace'][];
  receipts: StartRows['receipt'][];
  mutations: StartRows['mutation'][];
  barriers: StartRows['barrier'][];
  identities: ReplayIdentityRow[];
}

/** `events` in stream order per stream (any interleaving of streams). */
export const rebuildProjections = (events: readonly EventRow[]): RebuiltProjections => {
  const states = new Map<string, RunState>();
  const pending = new Map<string, { event: RunStreamEvent; committedAtMs: number }[]>();
  const out: RebuiltProjections = { runs: [], stepRuns: [], audit: [], trace: [], receipts: [], mutations: [], barriers: [], identities: [] };

  for (const row of events) {
    const event = checkEventRow(row);
    states.set(row.stream_id, evolve(states.get(row.stream_id) ?? initialRunState(), event));
    const batch = pending.get(row.stream_id) ?? [];
    if ((START_FACT_TYPES as readonly string[]).includes(event.type)) {
      batch.push({ event, committedAtMs: Number(row.committed_at_ms) });
      if (event.type === 'ToolExecutionStartBarrierCommitted') {
        const rows = startRowsOf(batch.map((b) => b.event) as unknown as StartFacts, batch[0]!.committedAtMs);
        out.audit.push(rows.audit);
        out.trace.push(rows.trace);
        out.receipts.push(rows.receipt);
        out.mutations.push(rows.mutation);
        out.barriers.push(rows.barrier);
        out.identities.push(...rows.identities);
        batch.length = 0;
      }
    }
    pending.set(row.stream_id, batch);
  }
  for (const state of states.values()) {
    if (state.run === null) continue;
    out.runs.push(runRowOf(state.run));
    out.stepRuns.push(...Object.values(state.stepRuns).map(stepRunRowOf));
  }
  return out;
};
