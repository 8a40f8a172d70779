import { openMemoryStartBarrier } from '../../infrastructure/memory/memoryAuthority';
import { memoryDamageSession } from '../../testkit/memoryDamage';
import { headForgerySuite, removeThrough, rewriteThrough } from '../conformance/headForgeryConformance';

headForgerySuite({
  runHeads: false,
  name: 'in-memory',
  open: async () => {
    const authority = await openMemoryStartBarrier();
    const damage = memoryDamageSession(authority);
    return { authority, rewriteHead: rewriteThrough(damage), removeHead: removeThrough(damage), close: () => authority.close() };
  },
});
