import { openMemoryStartBarrier, type Tables } from '../../infrastructure/memory/memoryAuthority';
import { keyedEvidenceSuite, type KeyedBackend } from '../conformance/keyedEvidenceConformance';
import { keyedLifecycleSuite } from '../conformance/keyedLifecycleConformance';

// One store, several authorities: each new authority is pointed at the first one's tables.
const backend: KeyedBackend = {
  name: 'in-memory',
  create: async () => {
    let shared: { tables: Tables } | undefined;
    const replacer = (_: string, v: unknown) => (v instanceof Map ? [...v.entries()] : v instanceof Set ? [...v] : v);
    return {
      open: async (keys) => {
        const a = await openMemoryStartBarrier(keys === undefined ? {} : { evidenceKeys: keys });
        const inner = a as unknown as { tables: Tables };
        if (shared === undefined) shared = inner;
        else Object.defineProperty(inner, 'tables', { get: () => shared!.tables, set: (t: Tables) => void (shared!.tables = t) });
        return a;
      },
      dump: async () => JSON.stringify(shared?.tables, replacer),
      removeSealOrigins: async () => {
        const saved = [...shared!.tables.sealOrigins];
        shared!.tables.sealOrigins.clear();
        return { undo: async () => void saved.forEach(([k, v]) => shared!.tables.sealOrigins.set(k, v)) };
      },
      close: async () => undefined,
    };
  },
};
keyedEvidenceSuite(backend);
keyedLifecycleSuite(backend);
