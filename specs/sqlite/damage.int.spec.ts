import { join } from 'node:path';
import type { SqliteStartBarrier } from '../../infrastructure/sqlite';
import { sqliteDamageSession } from '../../testkit/damage';
import { damageSuite } from '../conformance/damageConformance';
import { freshDir } from '../support/tmp';
import { openFreshSqlite } from './support';

damageSuite({
  name: 'SQLite',
  chained: true,
  replayIndex: false,
  // the damage session turns CHECK constraints off on its connection
  guarded: [],
  open: async (seed) => {
    const dir = freshDir('damage');
    const source = join(dir, 'source.db');
    const seeded = await openFreshSqlite(undefined, source);
    await seed(seeded);
    (seeded as SqliteStartBarrier).db.pragma('wal_checkpoint(TRUNCATE)');
    await seeded.close();
    const copy = join(dir, 'damaged.db');
    const damage = sqliteDamageSession(source, copy);
    const authority = await openFreshSqlite(undefined, copy);
    return {
      authority,
      damage,
      cli: ['--db', copy],
      close: async () => {
        await authority.close();
        await damage.close();
      },
    };
  },
});
