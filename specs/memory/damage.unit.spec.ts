import { openMemoryStartBarrier } from '../../infrastructure/memory/memoryAuthority';
import { memoryDamageSession } from '../../testkit/memoryDamage';
import { damageSuite } from '../conformance/damageConformance';

damageSuite({
  name: 'in-memory',
  guarded: [],
  // the replay index is a Map keyed by (identity, value): there is no index to drop
  chained: false,
  open: async (seed) => {
    const authority = await openMemoryStartBarrier();
    await seed(authority);
    return { authority, damage: memoryDamageSession(authority), close: () => authority.close() };
  },
});
