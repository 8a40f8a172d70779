import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { checksumOf, loadMigrations } from '../../infrastructure/migrations';
import { DIALECTS, ROOT, onDisk } from '../support/migrationFiles';

// The SQL ships inside the built code (infrastructure/migrationsSql.generated.ts, written from
// migrations/ by the build), so a bundle or a relocated install never reads a folder. These
// specs fail when the embedded SQL is stale against migrations/, and pin the checksums of the
// migrations already applied in the field: a store migrated by an earlier version must open.
// (That the build embeds them too is builtMigrations.int.spec.ts: it reads dist/, which the
// unit tier, run beside the compile, must not.)

/** Checksums recorded in databases migrated before the SQL was embedded: never to change. */
const APPLIED_IN_THE_FIELD: Readonly<Record<string, string>> = {
  '0001-event-store': 'sha256:c78dbbb0689655656d79994155df165527a03716ddbcde89a6b6252c758e62e9',
  '0002-run-read-models': 'sha256:89f202a4c293ca41b309e775322f5c9dabaa3ba94f9ae38d7d410e06f3480620',
  '0003-start-evidence': 'sha256:71b3206815400c9d0b6aeaeb688ccda8c27cab74fccaba8f99e4b3f3271de18d',
  '0055-tool-execution-start-barriers': 'sha256:5fc97e3cc99f858cbe2ccadeb8f0a5b6505a2350d677c52e334657f26d8950bf',
  '0056-capability-v28': 'sha256:216107280196c3d6c7d66efaa1cc9f7d6d16b4a8c160da78145dd5a51119eb1f',
  'pg-0001-event-store': 'sha256:16ea57e84123da72c433c452d106cfe6784ccd9f16c5b7ec6cef36d647f11c4a',
  'pg-0002-run-read-models': 'sha256:5d80bf471764f71ac12f90e3844abaa36951087979029d62fd8d600616212775',
  'pg-0003-start-evidence': 'sha256:a436311109772a972f6f5bedff939943b61e424802551d0c5b6033080aa5b5f1',
  'pg-0030-tool-execution-start-barriers': 'sha256:dc777cbeff38034b00931d04a0dbadcdf81ce482242d90aee3c2aefcaf0a35e8',
};

describe('R6.1 migrations embedded in the code', () => {
  for (const dialect of DIALECTS) {
    it(`R6.1 the embedded ${dialect} migrations are exactly migrations/${dialect}/*.sql, in order, byte for byte`, () => {
      expect(loadMigrations(dialect).map(({ name, sql }) => ({ name, sql }))).to.deep.equal(onDisk(dialect));
    });
  }

  it('R6.1 the checksums of migrations already applied in the field are unchanged (migrated stores still open)', () => {
    const known = new Map([...loadMigrations('sqlite'), ...loadMigrations('postgres')].map((m) => [m.name, m.checksum]));
    for (const [name, checksum] of Object.entries(APPLIED_IN_THE_FIELD)) expect(known.get(name), name).to.equal(checksum);
    for (const m of loadMigrations('sqlite')) expect(m.checksum).to.equal(checksumOf(readFileSync(join(ROOT, 'migrations', 'sqlite', `${m.name}.sql`), 'utf8')));
  });
});
