import { openMemoryStartBarrier, type Tables } from '../../infrastructure/memory/memoryAuthority';
import { rebuildSuite, type StoredTable } from '../conformance/rebuildConformance';
import { conformanceSuite } from '../conformance/startBarrierConformance';

conformanceSuite({ name: 'in-memory', open: (hook) => openMemoryStartBarrier(hook ? { hooks: { onStartStep: hook } } : {}) });

rebuildSuite({
  name: 'in-memory',
  open: () => openMemoryStartBarrier(),
  // The stored rows of this backend are its tables.
  rows: async (a, table) => {
    const t = (a as unknown as { tables: Tables }).tables;
    const rows: Record<StoredTable, Iterable<object>> = {
      events: t.events,
      runs: t.runs.values(),
      step_runs: t.stepRuns.values(),
      security_audit_events: t.audit.values(),
      trace_anchors: t.trace.values(),
      audit_receipts: t.receipts.values(),
      step_run_mutations: t.mutations.values(),
      tool_execution_start_barriers: t.barriers.values(),
      start_replay_identities: t.identities.values(),
    };
    return [...rows[table]] as Record<string, unknown>[];
  },
});
