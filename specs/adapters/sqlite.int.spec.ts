import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { freshDbPath } from '../support/tmp';
import { adapterConformance } from './adapterConformance';

adapterConformance({
  name: 'SQLite (real file)',
  open: async () => {
    const path = freshDbPath('adapters');
    const authority = await openSqliteStartBarrier({ path });
    return { authority, cliArgs: ['--db', path], close: () => authority.close() };
  },
});
