import { openMemoryStartBarrier } from '../../infrastructure/memory/memoryAuthority';
import { sagaConformance } from './sagaConformance';

sagaConformance({
  name: 'in-memory',
  open: async () => {
    const authority = await openMemoryStartBarrier();
    // One store, no second connection: the separate read is a fresh read of the committed state.
    return { authority, separateRead: (id) => authority.barriers.getByStartId(id), close: () => authority.close() };
  },
});
