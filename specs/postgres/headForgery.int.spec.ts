import { postgresDamageSession } from '../../testkit/damage';
import { createDatabase, openOn } from '../../testkit/postgresHarness';
import { headForgerySuite, moveRunHeadsThrough, rewriteThrough } from '../conformance/headForgeryConformance';

headForgerySuite({
  runHeads: true,
  name: 'PostgreSQL',
  open: async () => {
    const db = await createDatabase();
    const authority = await openOn(db);
    const damage = await postgresDamageSession(db.url);
    return {
      authority,
      rewriteHead: rewriteThrough(damage),
      moveRunHeads: moveRunHeadsThrough(damage),
      close: async () => {
        await damage.close();
        await authority.close();
        await db.drop();
      },
    };
  },
});
