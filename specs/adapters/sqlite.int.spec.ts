import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { freshDbPath } from '../support/tmp';
import { adapterConformance } from './adapterConformance';

adapterConformance({
  name: 'SQLite (real file)',
  open: async () => {
    const authority = await openSqliteStartBarrier({ path: freshDbPath('adapters') });
    return { authority, close: () => authority.close() };
  },
});
