import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { freshDbPath } from '../support/tmp';
import { sagaConformance } from './sagaConformance';

sagaConformance({
  name: 'SQLite (real file; the adapter reads through a second connection)',
  open: async () => {
    const path = freshDbPath('saga');
    const authority = await openSqliteStartBarrier({ path });
    const reader = await openSqliteStartBarrier({ path });
    return {
      authority,
      separateRead: (id) => reader.barriers.getByStartId(id),
      target: { kind: 'sqlite', location: path },
      close: async () => {
        await reader.close();
        await authority.close();
      },
    };
  },
});
