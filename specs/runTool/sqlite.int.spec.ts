import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { freshDbPath } from '../support/tmp';
import { TEST_PLANS } from '../../testkit/planKeys';
import { runToolCrashConformance } from './crashTool';

runToolCrashConformance({
  name: 'SQLite (a real file shared with the killed runtime)',
  open: async () => {
    const path = freshDbPath('run-tool');
    const authority = await openSqliteStartBarrier({ path, plans: TEST_PLANS });
    return { authority, kind: 'sqlite', location: path, close: () => authority.close() };
  },
});
