import { openKeyedSqlite } from '../support/freshStores';
import { adaptersKeepTheirWord, claimLeasesBounded } from './keepTheirWord';

const sqlite = {
  name: 'SQLite (real file)',
  open: () => openKeyedSqlite('adapters-keep-word'),
};

adaptersKeepTheirWord(sqlite);
claimLeasesBounded(sqlite);
