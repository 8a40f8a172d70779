import { FORGERIES } from '../../testkit/forgery';
import { sqliteForgeryTarget } from '../../testkit/forgeryTargets';
import { forgerySuite } from '../conformance/forgeryConformance';
import { freshDbPath } from '../support/tmp';

// R9.1 / R9.2 on SQLite: any process may open the file, with foreign keys off as SQLite
// defaults them. The history triggers refuse what they can check at insert time; what only
// COMMIT could refuse (a start fact without its move, under foreign keys off) and what the
// triggers cannot see (a lifecycle event appended without moving its head) `verify` reports.
describe('R9.1/R9.2 forgeries by another process on SQLite: refused by triggers or reported by verify', function () {
  this.timeout(120_000);
  forgerySuite(
    () => sqliteForgeryTarget(freshDbPath('forgery'), freshDbPath('forgery-source')),
    Object.fromEntries(FORGERIES.filter((f) => /UPDATE|gap|out of order|copied|started again/.test(f.name)).map((f) => [f.name, 'refused'])),
  );
});
