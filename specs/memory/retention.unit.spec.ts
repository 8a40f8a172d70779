import { openMemoryStartBarrier } from '../../infrastructure/memory/memoryAuthority';
import { retentionSuite } from '../conformance/retentionConformance';

retentionSuite({
  name: 'memory',
  open: async () => {
    const authority = await openMemoryStartBarrier();
    return { authority, compact: (options) => authority.retention.compact(options as { before: number }), close: () => authority.close() };
  },
});
