import { openMemoryStartBarrier } from '../../infrastructure/memory/memoryAuthority';
import { memoryDamageSession } from '../../testkit/memoryDamage';
import { headForgerySuite, rewriteThrough } from '../conformance/headForgeryConformance';

headForgerySuite({
  runHeads: false,
  name: 'in-memory',
  open: async () => {
    const authority = await openMemoryStartBarrier();
    return { authority, rewriteHead: rewriteThrough(memoryDamageSession(authority)), close: () => authority.close() };
  },
});
