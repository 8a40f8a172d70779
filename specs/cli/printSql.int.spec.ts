import { expect } from 'chai';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { loadMigrations } from '../../infrastructure/migrations';
import { MigrationError, SchemaMissingError, openPostgresStartBarrier } from '../../infrastructure/postgres';
import { createDatabase, type TestDatabase } from '../../testkit/postgresHarness';
import { freshDir } from '../support/tmp';
import { buildOnce, json, runCli } from './cliSuite';

// R5.2 R6.1 The SQL a DBA reviews and runs: `migrate --print-sql` prints what `migrate` would
// apply (all of it on an empty database, nothing once it is current) and applies nothing; the
// printed script, run as it is, gives a store the runtime opens with `migrate: false`. A runtime
// without migration rights that meets an empty database is told to ask the owner to run migrate.

const schemaExists = (db: TestDatabase): Promise<boolean> =>
  db.admin(async (c) => (await c.query<{ present: boolean }>("SELECT to_regnamespace('ql3') IS NOT NULL AS present")).rows[0]!.present);

describe('R5.2 R6.1 qinglong-barrier migrate --print-sql and the empty database (PostgreSQL)', function () {
  this.timeout(120_000);
  const dbs: TestDatabase[] = [];
  const fresh = async () => {
    const db = await createDatabase();
    dbs.push(db);
    return db;
  };
  before(() => buildOnce());
  after(async () => {
    for (const db of dbs) await db.drop();
  });

  it('R6.1 on an empty database it prints every migration in order, in one transaction, and applies nothing', async () => {
    const db = await fresh();
    const r = await runCli(['--postgres', db.url, 'migrate', '--print-sql']);
    expect(r.code, r.stderr).to.equal(0);
    const names = loadMigrations('postgres').map((m) => m.name);
    const printed = [...r.stdout.matchAll(/^-- (\S+) \(sha256:[0-9a-f]{64}\)$/gm)].map((m) => m[1]);
    expect(printed).to.deep.equal(names);
    expect(r.stdout).to.match(/^-- qinglong-barrier migrate --print-sql: /);
    expect(r.stdout).to.include('\nBEGIN;\n').and.match(/\nCOMMIT;\n$/);
    expect(r.stdout).to.include('superuser');
    expect(await schemaExists(db), 'nothing applied').to.equal(false);
  });

  it('R5.2 the printed script, run by the DBA as it is, makes the store the runtime opens with migrate: false; then nothing is left to print or apply', async () => {
    const db = await fresh();
    const script = (await runCli(['--postgres', db.url, 'migrate', '--print-sql'])).stdout;
    await db.admin((c) => c.query(script));
    const authority = await openPostgresStartBarrier({ connectionString: db.url, migrate: false });
    await authority.close();
    const again = await runCli(['--postgres', db.url, 'migrate', '--print-sql']);
    expect(again.code, again.stderr).to.equal(0);
    expect(again.stdout).to.match(/^-- nothing to apply: this database has all \d+ migrations of this version\n$/);
    expect(json<{ applied: string[] }>(await runCli(['--postgres', db.url, 'migrate']))).to.deep.equal({ applied: [] });
  });

  it('R6.1 on a database that lacks only the last migrations it prints only those', async () => {
    const db = await fresh();
    const all = loadMigrations('postgres');
    const full = (await runCli(['--postgres', db.url, 'migrate', '--print-sql'])).stdout;
    // Apply all but the last two files, as the DBA's script would have applied them.
    const upTo = full.indexOf(`\n-- ${all[all.length - 2]!.name} (`);
    await db.admin((c) => c.query(`${full.slice(0, upTo)}\nCOMMIT;`));
    const rest = await runCli(['--postgres', db.url, 'migrate', '--print-sql']);
    expect([...rest.stdout.matchAll(/^-- (\S+) \(sha256:/gm)].map((m) => m[1])).to.deep.equal(all.slice(-2).map((m) => m.name));
    expect(rest.stdout).to.include(`it has ${all.length - 2} of ${all.length}`);
    // The runtime on that database: behind, named, with the fix.
    const behind = await openPostgresStartBarrier({ connectionString: db.url, migrate: false }).then(
      () => expect.fail('opened a database that is behind'),
      (e: unknown) => e as Error,
    );
    expect(behind).to.be.instanceOf(MigrationError).and.not.instanceOf(SchemaMissingError);
    expect(behind.message).to.include(`behind this code: ${all.at(-2)!.name}, ${all.at(-1)!.name} not applied`);
  });

  it('R6.1 --print-sql is for PostgreSQL: on SQLite it is a usage error (exit 2) and creates no file', async () => {
    const path = join(freshDir('cli-print-sql'), 'absent.db');
    const r = await runCli(['--db', path, 'migrate', '--print-sql']);
    expect(r.code).to.equal(2);
    expect(r.stderr).to.include('--print-sql prints the SQL for PostgreSQL');
    expect(existsSync(path)).to.equal(false);
  });

  it('R5.2 the runtime (migrate: false) meeting an empty database: SchemaMissingError, MIGRATION_REFUSED, "ask the owner to run migrate"; nothing created; the CLI (exit 1) says the same', async () => {
    const db = await fresh();
    const error = await openPostgresStartBarrier({ connectionString: db.url, migrate: false }).then(
      () => expect.fail('opened an empty database'),
      (e: unknown) => e,
    );
    expect(error).to.be.instanceOf(SchemaMissingError).and.instanceOf(MigrationError);
    expect(error).to.include({ code: 'MIGRATION_REFUSED', reason: 'schema_missing', name: 'SchemaMissingError' });
    expect((error as Error).message).to.include('ask the owner to run migrate');
    expect(await schemaExists(db)).to.equal(false);
    // The CLI's read commands open the same way: exit 1 with the same words.
    const r = await runCli(['--postgres', db.url, 'in-doubt']);
    expect(r.code).to.equal(1);
    expect(r.stderr).to.include('ask the owner to run migrate');
  });

  it('R5.2 a login that may not create the schema (migrate: true) meeting an empty database gets the same typed error', async () => {
    const db = await fresh();
    const role = `barrier_nobody_${db.name.slice(3, 11)}`;
    await db.admin((c) => c.query(`CREATE ROLE ${role} LOGIN; REVOKE CREATE ON SCHEMA public FROM PUBLIC; REVOKE CREATE ON DATABASE ${db.name} FROM PUBLIC`));
    try {
      const url = Object.assign(new URL(db.url), { username: role }).toString();
      const error = await openPostgresStartBarrier({ connectionString: url }).then(
        () => expect.fail('migrated without rights'),
        (e: unknown) => e,
      );
      expect(error).to.be.instanceOf(SchemaMissingError);
      expect((error as Error).message).to.include('ask the owner to run migrate').and.include('may not create it');
      expect(await schemaExists(db)).to.equal(false);
    } finally {
      await db.admin((c) => c.query(`DROP OWNED BY ${role}; DROP ROLE IF EXISTS ${role}`));
    }
  });
});
