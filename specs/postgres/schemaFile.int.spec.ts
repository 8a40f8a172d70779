import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { loadMigrations } from '../../infrastructure/migrations';
import { migratePostgres } from '../../infrastructure/postgres/migrate';
import { readSchemaObjects } from '../../infrastructure/postgres/schemaObjects';
import { READ_BARRIER_ROWS_SQL } from '../../infrastructure/postgres/barrierReadSql';
import { createDatabase, type TestDatabase } from '../../testkit/postgresHarness';

// The readable schema file is the schema: a fresh database migrated to the ADR's pg-0030 and
// one migrated to today differ by exactly what pg-0031-start-barrier-schema.sql says, read
// from the live catalog. Every table, column, index, function and trigger beyond pg-0030 is
// created in that file exactly once; every object the file creates exists; every changed grant
// is a GRANT or REVOKE of that file; no views.

const FILE = 'pg-0031-start-barrier-schema';
const SQL = readFileSync(join(__dirname, '..', '..', 'migrations', 'postgres', `${FILE}.sql`), 'utf8');
/** The file without its comments (a `--` inside a string literal does not occur in it). */
const CODE = SQL.split('\n')
  .map((line) => line.replace(/--.*$/, ''))
  .join('\n');

const all = (re: RegExp, text = CODE): RegExpExecArray[] => [...text.matchAll(re)];
const counted = (names: readonly string[]): Map<string, number> => names.reduce((m, n) => m.set(n, (m.get(n) ?? 0) + 1), new Map<string, number>());

/** What the file creates, each key as readSchemaObjects names it. */
const created = (() => {
  const tables = all(/CREATE TABLE ql3\.(\w+)/g).map((m) => `table ${m[1]}`);
  const columns = all(/ALTER TABLE ql3\.(\w+) ADD COLUMN (\w+)/g).map((m) => `column ${m[1]}.${m[2]}`);
  const indexes = all(/CREATE (?:UNIQUE )?INDEX (\w+) ON ql3\.\w+/g).map((m) => `index ${m[1]}`);
  const functions = all(/CREATE FUNCTION ql3\.(\w+\([^)]*\))/g).map((m) => `function ${m[1]}`);
  const replaced = all(/CREATE OR REPLACE FUNCTION ql3\.(\w+\([^)]*\))/g).map((m) => `function ${m[1]}`);
  const triggers = all(/CREATE (?:CONSTRAINT )?TRIGGER (\w+)\s[^;]*?\sON ql3\.(\w+)/g).map((m) => `trigger ${m[2]}.${m[1]}`);
  return { tables, columns, indexes, functions, replaced, triggers };
})();

const migrated = async (db: TestDatabase, upTo?: string) =>
  db.admin(async (c) => {
    const known = loadMigrations('postgres');
    await migratePostgres(c, upTo === undefined ? known : known.filter((m) => m.name < upTo), { checkObjects: false });
    return readSchemaObjects(c);
  });

describe(`the PostgreSQL schema file (${FILE}) against the live catalog`, function () {
  this.timeout(120_000);
  let adrObjects: ReadonlyMap<string, string>;
  let todayObjects: ReadonlyMap<string, string>;
  let adrDefinitions: ReadonlyMap<string, string>;
  let todayDefinitions: ReadonlyMap<string, string>;
  const dbs: TestDatabase[] = [];
  let today: TestDatabase;

  before(async () => {
    const adr = await createDatabase();
    today = await createDatabase();
    dbs.push(adr, today);
    const [a, b] = [await migrated(adr, 'pg-0031'), await migrated(today)];
    [adrObjects, todayObjects, adrDefinitions, todayDefinitions] = [a.objects, b.objects, a.definitions, b.definitions];
  });
  after(async () => {
    for (const db of dbs) await db.drop();
  });

  const added = (kind: string) => [...todayObjects.keys()].filter((k) => k.startsWith(`${kind} `) && !adrObjects.has(k));
  const constraintNames = () => new Set([...todayObjects.keys()].filter((k) => k.startsWith('constraint ')).map((k) => k.slice(k.indexOf('.') + 1)));

  it('the migrations after pg-0030 are this one file', () => {
    expect(loadMigrations('postgres').map((m) => m.name).filter((n) => n >= 'pg-0031')).to.deep.equal([FILE]);
  });

  it('every object the file creates is created once and exists live', () => {
    for (const [kind, keys] of Object.entries(created)) {
      const twice = [...counted(keys)].filter(([, n]) => n > 1).map(([k]) => k);
      expect(twice, `${kind} created more than once`).to.deep.equal([]);
      const missing = keys.filter((k) => !todayObjects.has(k));
      expect(missing, `${kind} the file creates that the catalog lacks`).to.deep.equal([]);
    }
    const defined = [...created.functions, ...created.replaced];
    expect(defined.length, 'one definition per function').to.equal(new Set(defined).size);
    expect(CODE).to.not.match(/CREATE (OR REPLACE )?VIEW/);
    expect([...todayObjects.keys()].filter((k) => k.startsWith('view ')), 'views').to.deep.equal([]);
  });

  it('every table, column, index, function and trigger beyond pg-0030 is created by the file', () => {
    const newTables = new Set(added('table').map((k) => k.slice('table '.length)));
    expect(added('table').sort()).to.deep.equal([...created.tables].sort());
    // columns of the tables pg-0030 has come from ADD COLUMN; those of new tables from their CREATE TABLE
    expect(added('column').filter((k) => !newTables.has(k.slice('column '.length).split('.')[0]!)).sort()).to.deep.equal([...created.columns].sort());
    // indexes that back a constraint come with it
    const constraints = constraintNames();
    expect(added('index').filter((k) => !constraints.has(k.slice('index '.length))).sort()).to.deep.equal([...created.indexes].sort());
    expect(added('function').sort()).to.deep.equal([...created.functions].sort());
    expect(added('trigger').sort()).to.deep.equal([...created.triggers].sort());
    expect(created.triggers.length, 'the parse found the triggers').to.be.greaterThan(30);
  });

  it('a function pg-0030 made and the file changes is replaced there, once; nothing else of pg-0030 changes unseen', () => {
    const changed = [...adrObjects.keys()].filter((k) => k.startsWith('function ') && todayObjects.has(k) && (todayObjects.get(k) !== adrObjects.get(k) || todayDefinitions.get(k) !== adrDefinitions.get(k)));
    expect(changed.sort()).to.deep.equal([...created.replaced].sort());
    // what pg-0030 had and today's schema lacks is dropped by the file
    const droppedTables = new Set([...adrObjects.keys()].filter((k) => k.startsWith('table ') && !todayObjects.has(k)).map((k) => k.slice('table '.length)));
    const ofDroppedTable = (k: string) => droppedTables.has(k.slice(k.indexOf(' ') + 1).split('.')[0]!) || (k.startsWith('index ') && droppedTables.has(/^on (\w+)/.exec(adrObjects.get(k) ?? '')?.[1] ?? ''));
    const gone = [...adrObjects.keys()].filter((k) => !todayObjects.has(k) && !k.startsWith('grant ') && !k.startsWith('constraint ') && (k.startsWith('table ') || !ofDroppedTable(k)));
    expect(gone, 'the JSON copies pg-0030 kept').to.include('column tool_execution_start_barriers.barrier_json');
    for (const k of gone) {
      const [kind, name] = [k.slice(0, k.indexOf(' ')), k.slice(k.indexOf(' ') + 1)];
      const pattern =
        kind === 'column' ? new RegExp(`DROP COLUMN ${name.split('.')[1]}\\b`) : kind === 'index' ? new RegExp(`DROP (INDEX ql3\\.|CONSTRAINT )${name}\\b`) : new RegExp(`DROP \\w+ (ql3\\.)?${name}\\b`);
      expect(CODE, `${k} is dropped by the file`).to.match(pattern);
    }
  });

  it('ql3.read_barrier_rows runs the barrier read its reader decodes (barrierReadSql.ts), column for column', async () => {
    const src = await today.admin(async (c) => (await c.query<{ src: string }>("SELECT prosrc AS src FROM pg_proc WHERE proname = 'read_barrier_rows'")).rows[0]!.src);
    const flat = (text: string) => text.replace(/\s+/g, ' ').trim();
    expect(flat(src)).to.contain(flat(READ_BARRIER_ROWS_SQL));
  });

  it('every grant that differs from pg-0030 is a GRANT or REVOKE of the file', () => {
    const statements = CODE.split(';').map((s) => s.replace(/\s+/g, ' ').trim()).filter((s) => /^(GRANT|REVOKE) /.test(s));
    const objectOf = (k: string) => {
      const [, kind, name] = /^grant (\w+) (.*) to [\w]+$/.exec(k)!;
      if (kind === 'schema') return { pattern: 'SCHEMA ql3', all: 'SCHEMA ql3' };
      if (kind === 'function') return { pattern: `ql3.${name!.slice(0, name!.indexOf('('))}(`, all: 'ALL FUNCTIONS IN SCHEMA ql3' };
      const table = kind === 'column' ? name!.split('.')[0]! : name!;
      return { pattern: `ql3.${table}`, all: 'ALL TABLES IN SCHEMA ql3' };
    };
    const roleOf = (k: string) => k.slice(k.lastIndexOf(' to ') + 4);
    const covered = (k: string, verb: 'GRANT' | 'REVOKE') => {
      const { pattern, all: wide } = objectOf(k);
      return statements.some((s) => s.startsWith(verb) && (s.includes(pattern) || (verb === 'REVOKE' && s.includes(wide))) && s.includes(roleOf(k)));
    };
    const granted = [...todayObjects.keys()].filter((k) => k.startsWith('grant ') && todayObjects.get(k) !== adrObjects.get(k));
    expect(granted.filter((k) => !covered(k, 'GRANT') && !covered(k, 'REVOKE'))).to.deep.equal([]);
    const revoked = [...adrObjects.keys()].filter((k) => k.startsWith('grant ') && !todayObjects.has(k));
    expect(revoked.filter((k) => !covered(k, 'REVOKE'))).to.deep.equal([]);
  });
});
