import { streamNameOf } from '../../domain';
import { type StepRunRow } from '../../projections/rows';
import type { StoredBarrier, VerifyProblem } from '../../domain/records';
import { evidenceProblemOf, type RecoveryView } from '../../application/recoveryRules';
import { IDENTITY_STORAGE, barrierHolds, factStartIds } from './identities';
import { streamEventsOfType, streamHeadsOf, type Tables } from './tables';
import { memorySealedSpan } from './memorySeals';
import { memoryCompactionProblems } from './memoryRetention';

// The in-memory side of the recovery read models: the same view as SQLite's, over the
// tables of one committed state (a transaction swaps in a new state, so this one is stable).

export interface MemoryRecoveryHost {
  readBarrier(startId: string): StoredBarrier | null;
  nowMs(): number;
}

const byKey = <T>(rows: Iterable<T>, key: (r: T) => string) => [...rows].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));

export const createMemoryRecoveryView = (t: Tables, host: MemoryRecoveryHost): RecoveryView => {
  const barriers = () => [...t.barriers.values()];
  const stepKey = (r: StepRunRow) => `${r.run_id}\u0000${r.step_run_id}`;
  // In the Project's scope: its own project_id, or its Run's (one changed mirror column must not take a row out, R9.3).
  const inProject = (row: { readonly project_id: string; readonly run_id: string }, projectId: string | undefined) =>
    projectId === undefined || row.project_id === projectId || t.runs.get(row.run_id)?.project_id === projectId;
  const inDoubtRows = () =>
    barriers()
      .filter((b) => !t.outcomes.has(b.start_id))
      .map((b) => ({ start_id: b.start_id, project_id: b.project_id, run_id: b.run_id, committed_at_ms: b.committed_at_ms }));
  return {
    nowMs: async () => host.nowMs(),
    sealedSpan: async (streamId, from, to) => memorySealedSpan(t, streamId, from, to),
    inDoubtStartIds: async (f) =>
      barriers()
        .filter((b) => !t.outcomes.has(b.start_id))
        .filter((b) => inProject(b, f.projectId))
        .filter((b) => f.runId === undefined || b.run_id === f.runId)
        .filter((b) => f.committedAtOrBeforeMs === undefined || b.committed_at_ms <= f.committedAtOrBeforeMs)
        .sort((a, b) => a.committed_at_ms - b.committed_at_ms || (a.start_id < b.start_id ? -1 : 1))
        .slice(0, f.limit)
        .map((b) => b.start_id),
    resolvedRunIds: async (f) =>
      [
        ...new Set(
          barriers()
            .filter((b) => t.outcomes.has(b.start_id))
            .filter((b) => inProject(b, f.projectId))
            .filter((b) => f.runId === undefined || b.run_id === f.runId)
            .filter((b) => f.committedAtOrBeforeMs === undefined || b.committed_at_ms <= f.committedAtOrBeforeMs)
            .map((b) => b.run_id),
        ),
      ].sort(),
    attemptStartIds: async (runId, stepRunId) =>
      barriers()
        .filter((b) => b.run_id === runId && b.step_run_id === stepRunId)
        .sort((a, b) => a.started_step_run_version - b.started_step_run_version)
        .map((b) => b.start_id),
    stepRunStartedRows: async (runId) => streamEventsOfType(t, streamNameOf(runId), 'StepRunStarted'),
    stepRunCreatedRows: async (runId) => streamEventsOfType(t, streamNameOf(runId), 'StepRunCreated'),
    identityStartIds: async (identity, key, attempt) => {
      const indexed = t.identities.get(`${identity}\u0000${key}`);
      const mirrored = barriers().filter((b) => barrierHolds(IDENTITY_STORAGE[identity], b, key, attempt));
      return [...(indexed ? [indexed.start_id] : []), ...mirrored.map((b) => b.start_id), ...factStartIds(IDENTITY_STORAGE[identity], t, key)];
    },
    readBarrier: async (startId) => host.readBarrier(startId),
    outcomeRows: async (startId) => {
      const row = t.outcomes.get(startId);
      return row === undefined ? [] : [row];
    },
    eventById: async (eventId) => t.events.find((e) => e.event_id === eventId),
    stepRunRow: async (runId, stepRunId) => t.stepRuns.get(`${runId}\u0000${stepRunId}`),
    runHeads: async (runId) => streamHeadsOf(t, runId),
    runningStepRuns: async (f) =>
      byKey(t.stepRuns.values(), stepKey)
        .filter((r) => r.status === 'running' && inProject(r, f.projectId) && (f.runId === undefined || r.run_id === f.runId))
        .slice(0, f.limit),
    // The memory store keeps no index: its in-doubt rows are the barriers with no outcome.
    inDoubtIndexPage: async (f) =>
      inDoubtRows()
        .filter((b) => (f.projectId === undefined || b.project_id === f.projectId) && (f.runId === undefined || b.run_id === f.runId))
        .filter((b) => f.committedAtOrBeforeMs === undefined || b.committed_at_ms <= f.committedAtOrBeforeMs)
        .sort((a, b) => a.committed_at_ms - b.committed_at_ms || (a.start_id < b.start_id ? -1 : 1))
        .slice(0, f.limit),
    inDoubtIndexRowsAfter: async (after, limit) => byKey(inDoubtRows(), (r) => r.start_id).filter((r) => r.start_id > after).slice(0, limit),

    counts: async () => ({ barriers: t.barriers.size, outcomes: t.outcomes.size, runs: t.runs.size, stepRuns: t.stepRuns.size, events: t.events.length }),
    barrierIdsAfter: async (after, limit) => byKey(t.barriers.keys(), (k) => k).filter((k) => k > after).slice(0, limit),
    outcomeRowsAfter: async (after, limit) => byKey(t.outcomes.values(), (r) => r.start_id).filter((r) => r.start_id > after).slice(0, limit),
    runRowsAfter: async (after, limit) =>
      byKey(t.runs.values(), (r) => r.run_id)
        .filter((r) => r.run_id > after)
        .slice(0, limit)
        .map((r) => ({ ...r, stream_version: t.streams.get(`run-${r.run_id}`) ?? null })),
    stepRunRowsAfter: async (after, limit) => {
      const from = `${after[0]}\u0000${after[1]}`;
      return byKey(t.stepRuns.values(), stepKey).filter((r) => stepKey(r) > from).slice(0, limit);
    },
    eventRowsByStreamAfter: async ([afterStream, afterPosition], limit) =>
      t.events
        .map((e, i) => ({ ...e, global_position: i + 1 }))
        .filter((e) => e.stream_id > afterStream || (e.stream_id === afterStream && e.stream_position > afterPosition))
        .sort((a, b) => (a.stream_id < b.stream_id ? -1 : a.stream_id > b.stream_id ? 1 : a.stream_position - b.stream_position))
        .slice(0, limit),
    headsOfRun: async (runId) => {
      const run = t.runs.get(runId);
      return {
        run: run === undefined ? undefined : { ...run, stream_version: t.streams.get(`run-${runId}`) ?? null },
        stepRuns: byKey([...t.stepRuns.values()].filter((r) => r.run_id === runId), stepKey),
      };
    },

    integrityProblems: async () => {
      const problems: VerifyProblem[] = [];
      const movesByStart = new Set([...t.mutations.values()].map((m) => m.start_id));
      const evidence: [string, string, string, 'audit_event_id' | 'trace_id' | 'audit_receipt_id'][] = [
        ...[...t.audit.values()].map((r): [string, string, string, 'audit_event_id'] => ['security_audit_events', r.audit_event_id, r.start_id, 'audit_event_id']),
        ...[...t.trace.values()].map((r): [string, string, string, 'trace_id'] => ['trace_anchors', r.trace_id, r.start_id, 'trace_id']),
        ...[...t.receipts.values()].map((r): [string, string, string, 'audit_receipt_id'] => ['audit_receipts', r.audit_receipt_id, r.start_id, 'audit_receipt_id']),
      ];
      for (const [table, id, startId, column] of evidence) {
        const r = { table_name: table, record_id: id, start_id: startId, has_move: movesByStart.has(startId), has_barrier: t.barriers.get(startId)?.[column] === id };
        if (!r.has_move || !r.has_barrier) problems.push(evidenceProblemOf(r));
      }
      const barrierMutations = new Set([...t.barriers.values()].map((b) => b.mutation_id));
      for (const m of t.mutations.values()) {
        if (!barrierMutations.has(m.mutation_id)) problems.push({ kind: 'mutation_without_barrier', record: `step_run_mutations ${m.mutation_id}`, problem: `StepRun move of start ${m.start_id} without its barrier` });
      }
      // The foreign keys SQLite declares, checked by hand.
      const eventIds = new Set(t.events.map((e) => e.event_id));
      for (const o of t.outcomes.values()) {
        if (!t.barriers.has(o.start_id)) problems.push({ kind: 'foreign_key', record: `start_outcomes ${o.start_id}`, problem: 'references a missing tool_execution_start_barriers row' });
        if (!eventIds.has(o.event_id)) problems.push({ kind: 'foreign_key', record: `start_outcomes ${o.start_id}`, problem: 'references a missing events row' });
      }
      for (const r of t.stepRuns.values()) {
        if (!t.runs.has(r.run_id)) problems.push({ kind: 'foreign_key', record: `step_runs ${r.run_id}/${r.step_run_id}`, problem: 'references a missing runs row' });
      }
      const perStream = new Map<string, number>();
      const lastPosition = new Map<string, number>();
      for (const e of t.events) {
        perStream.set(e.stream_id, (perStream.get(e.stream_id) ?? 0) + 1);
        // the log's order follows each stream's positions (verify folds in stream order)
        const before = lastPosition.get(e.stream_id);
        if (before !== undefined && e.stream_position <= before) {
          problems.push({ kind: 'event', record: `${e.stream_id}@${e.stream_position}`, problem: `comes after position ${before} of its stream in the log` });
        }
        lastPosition.set(e.stream_id, e.stream_position);
      }
      for (const [stream, version] of t.streams) {
        const n = perStream.get(stream) ?? 0;
        if (n !== version) problems.push({ kind: 'stream_head', record: stream, problem: `stream head is at version ${version} but holds ${n} events` });
      }
      return [...problems, ...memoryCompactionProblems(t)];
    },
  };
};
