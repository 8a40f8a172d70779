import { openFreshSqlite } from '../support/freshStores';
import { adaptersKeepTheirWord, claimLeasesBounded } from './keepTheirWord';

const sqlite = {
  name: 'SQLite (real file)',
  open: () => openFreshSqlite('adapters-keep-word'),
};

adaptersKeepTheirWord(sqlite);
claimLeasesBounded(sqlite);
