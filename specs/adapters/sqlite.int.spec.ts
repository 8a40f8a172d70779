import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { freshDbPath } from '../support/tmp';
import { adapterConformance } from './adapterConformance';
import { TEST_PLANS } from '../../testkit/planKeys';

adapterConformance({
  name: 'SQLite (real file)',
  open: async () => {
    const path = freshDbPath('adapters');
    const authority = await openSqliteStartBarrier({ path, plans: TEST_PLANS });
    return { authority, cliArgs: ['--db', path], close: () => authority.close() };
  },
});
