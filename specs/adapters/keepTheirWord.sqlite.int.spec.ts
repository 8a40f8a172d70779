import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { freshDbPath } from '../support/tmp';
import { adaptersKeepTheirWord, claimLeasesBounded } from './keepTheirWord';
import { TEST_PLANS } from '../../testkit/planKeys';

const sqlite = {
  name: 'SQLite (real file)',
  open: async () => {
    const path = freshDbPath('adapters-keep-word');
    const authority = await openSqliteStartBarrier({ path, plans: TEST_PLANS });
    return { authority, cliArgs: ['--db', path], close: () => authority.close() };
  },
};

adaptersKeepTheirWord(sqlite);
claimLeasesBounded(sqlite);
