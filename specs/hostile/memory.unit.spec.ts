import type { Tables } from '../../infrastructure/memory/memoryAuthority';
import { openMemoryStartBarrier } from '../../infrastructure/memory/memoryAuthority';
import { durableContentConformance, hostileInputConformance } from './hostileInputConformance';

const backend: Parameters<typeof hostileInputConformance>[0] = {
  name: 'in-memory',
  open: () => openMemoryStartBarrier({}),
  counts: async (a) => {
    const t = (a as unknown as { tables: Tables }).tables;
    return Object.fromEntries(Object.entries(t).map(([k, v]) => [k, Array.isArray(v) ? v.length : (v as Map<unknown, unknown>).size]));
  },
};
hostileInputConformance(backend);
durableContentConformance(backend);
