import { openKeyedSqlite } from '../support/freshStores';
import { adapterConformance } from './adapterConformance';

adapterConformance({
  name: 'SQLite (real file)',
  open: () => openKeyedSqlite('adapters'),
});
