import { openMemoryStartBarrier } from '../../infrastructure/memory/memoryAuthority';
import type { InvocationPlanRow } from '../../application/invocationPlans';
import { sagaConformance, type SagaBackend } from './sagaConformance';
import { executionConformance } from './executionConformance';
import { TEST_PLANS } from '../../testkit/planKeys';

const backend: SagaBackend = {
  name: 'in-memory',
  open: async (plans = TEST_PLANS) => {
    const authority = await openMemoryStartBarrier(plans === null ? {} : { plans });
    const rows = (authority as unknown as { planRows: { rows: Map<string, InvocationPlanRow> } }).planRows.rows;
    // One store, no second connection: the separate read is a fresh read of the committed state.
    return {
      authority,
      separateRead: (id) => authority.barriers.getByStartId(id),
      planRow: async (id) => (rows.has(id) ? { ...rows.get(id)! } : null),
      damagePlan: async (id, column, value) => void rows.set(id, { ...rows.get(id)!, [column]: value }),
      close: () => authority.close(),
    };
  },
};
sagaConformance(backend);
executionConformance(backend);
