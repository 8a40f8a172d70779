import type { Tables } from '../../infrastructure/memory/memoryAuthority';
import { openMemoryStartBarrier } from '../../infrastructure/memory/memoryAuthority';
import type { NoteStore } from '../../application/recoveryRules';
import { recoveryConformance } from './recoveryConformance';

recoveryConformance({
  name: 'in-memory',
  controlsClock: true,
  open: (options) => openMemoryStartBarrier(options?.clock ? { clock: options.clock } : {}),
  // The stored rows of this backend are its tables; a spec may look at them directly.
  raw: async (a) => {
    const t = (a as unknown as { tables: Tables }).tables;
    return { events: [...t.events], outcomes: [...t.outcomes.values()] };
  },
  orphanNote: (a, startId, digest, text) => (a as unknown as { noteStore: NoteStore }).noteStore.put(startId, digest, text),
});
