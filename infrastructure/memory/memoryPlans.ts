import type { InvocationPlanRow, PlanRowStore } from '../../application/invocationPlans';

// The in-memory side table of sealed invocation plans (R12.2): outside the evidence tables (a
// start's transaction never copies it), insert-or-keep, and shredding is the one change a row sees.

export const memoryPlanRows = (rows = new Map<string, InvocationPlanRow>()): PlanRowStore & { readonly rows: Map<string, InvocationPlanRow> } => ({
  rows,
  insert: async (row) => {
    const stored = rows.get(row.start_id);
    if (stored !== undefined) return stored;
    rows.set(row.start_id, row);
    return row;
  },
  get: async (startId) => rows.get(startId) ?? null,
  shred: async (startId) => {
    const row = rows.get(startId);
    if (row === undefined || row.ciphertext === null) return false;
    rows.set(startId, { ...row, key_id: null, nonce: null, ciphertext: null });
    return true;
  },
  all: async () => [...rows.values()].sort((a, b) => (a.start_id < b.start_id ? -1 : 1)),
});
