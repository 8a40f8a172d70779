import { openMemoryStartBarrier } from '../../infrastructure/memory/memoryAuthority';
import { claimLeasesBounded } from './keepTheirWord';
import { TEST_PLANS } from '../../testkit/planKeys';

// The claim bounds of R12.3 on the in-memory authority (the rules, application/driverClaimRules.ts).
claimLeasesBounded({
  name: 'in-memory',
  open: async () => {
    const authority = await openMemoryStartBarrier({ plans: TEST_PLANS });
    return { authority, cliArgs: [], close: () => authority.close() };
  },
});
