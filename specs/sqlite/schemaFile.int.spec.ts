import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { migrateSqlite } from '../../infrastructure/sqlite/fileIdentity';
import * as SQL from '../../infrastructure/sqlite/sql';
import { RELEASED_MIGRATIONS } from './store0056';

// The schema is readable in one file: migrations/sqlite/0057-start-barrier-schema.sql takes a
// store of the ADR's migrations to the schema this code needs. Derived from a migrated store
// (sqlite_master): every object beyond what the ADR's migrations leave is created in that file,
// exactly once, with the SQL the store holds; every object the file creates is there; an ADR
// object that differs was altered or made again by the file.

const FILE = join(__dirname, '..', '..', 'migrations', 'sqlite', '0057-start-barrier-schema.sql');

interface SchemaObject {
  readonly type: string;
  readonly name: string;
  readonly tbl_name: string;
  readonly sql: string;
}

const objectsOf = (db: Database.Database): Map<string, SchemaObject> =>
  new Map((db.prepare(SQL.SCHEMA_OBJECTS).all() as SchemaObject[]).map((o) => [o.name, o]));

/** Comments dropped, whitespace collapsed: how two texts of one statement are compared. */
const normal = (sql: string): string =>
  sql.replace(/--[^\n]*/g, '').replace(/\s+/g, ' ').replace(/\( /g, '(').replace(/ \)/g, ')').replace(/ ,/g, ',').trim();

/** The file without its comments, whitespace collapsed: what a statement's text is searched in. */
const fileText = (): string => normal(readFileSync(FILE, 'utf8'));

/** Each name a CREATE of the file makes (temporary tables aside), as often as it is made. */
const createdNames = (text: string): string[] =>
  [...text.matchAll(/\bCREATE (?!TEMP )(?:UNIQUE )?(TABLE|INDEX|TRIGGER|VIEW) (?:IF NOT EXISTS )?(\w+)/g)].map((m) => m[2]!);

describe('the SQLite schema is the one readable file (0057-start-barrier-schema)', () => {
  const live = (() => {
    const db = new Database(':memory:');
    try {
      migrateSqlite(db, false);
      return objectsOf(db);
    } finally {
      db.close();
    }
  })();
  const released = (() => {
    const db = new Database(':memory:');
    try {
      db.exec(SQL.MIGRATIONS_TABLE);
      for (const m of RELEASED_MIGRATIONS) db.exec(m.sql);
      return objectsOf(db);
    } finally {
      db.close();
    }
  })();
  const text = fileText();
  const created = createdNames(text);
  const dropped = new Set([...text.matchAll(/\bDROP (?:TABLE|INDEX|TRIGGER) (\w+)/g)].map((m) => m[1]!));
  const altered = new Set([...text.matchAll(/\bALTER TABLE (\w+) ADD COLUMN/g)].map((m) => m[1]!));

  it('the store holds exactly the ADR objects and the ones the file creates, each created once', () => {
    const twice = created.filter((n, i) => created.indexOf(n) !== i);
    expect(twice, 'created more than once').to.deep.equal([]);
    expect(created.filter((n) => !live.has(n)), 'created by the file but not in the store').to.deep.equal([]);
    const unexplained = [...live.values()].filter((o) => !created.includes(o.name) && !(released.get(o.name)?.sql === o.sql) && !altered.has(o.name));
    expect(unexplained.map((o) => `${o.type} ${o.name}`), 'in the store, made neither by the ADR migrations nor by the file').to.deep.equal([]);
    expect(['events', 'schema_migrations'].filter((t) => !altered.has(t))).to.deep.equal([]);
  });

  it('every object the file creates is in the store with the SQL the file gives it (whitespace aside)', () => {
    for (const name of created) {
      const o = live.get(name)!;
      expect(text.includes(`${normal(o.sql)};`), `${o.type} ${name}: its stored SQL is not a statement of the file`).to.equal(true);
    }
  });

  it('every ADR object the file neither drops nor makes again is in the store as the ADR made it; an altered table only gained columns', () => {
    for (const [name, o] of released) {
      if (created.includes(name)) continue;
      const now = live.get(name);
      if (now === undefined && (dropped.has(name) || dropped.has(o.tbl_name))) continue; // what the store no longer needs
      expect(now, `${o.type} ${name} gone without the file dropping it`).to.not.equal(undefined);
      if (altered.has(name)) {
        const added = [...text.matchAll(new RegExp(`\\bALTER TABLE ${name} ADD COLUMN ([^;]+);`, 'g'))].map((m) => m[1]!);
        const without = added.reduce((sql, c) => sql.replace(`, ${normal(c)}`, ''), normal(now!.sql));
        expect(without, `${name} less the columns the file adds`).to.equal(normal(o.sql));
        expect(added.every((c) => normal(now!.sql).includes(normal(c))), name).to.equal(true);
      } else expect(now!.sql, `${o.type} ${name}`).to.equal(o.sql);
    }
  });

  it('the file speaks of no migration numbers or history', () => {
    const comments = readFileSync(FILE, 'utf8').split('\n').filter((l) => l.trim().startsWith('--')).join('\n');
    expect(comments.replace('pg-0031-start-barrier-schema', '')).to.not.match(/\b0\d{3}\b|\bsince\b|\bissue \d|\bbefore this\b/i);
  });
});
