import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { buildScenario } from '../../domain/scenario';
import { ConnectionError, openPostgresStartBarrier } from '../../infrastructure/postgres';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { createDatabase, urlOf, type TestDatabase } from '../../testkit/postgresHarness';
import { rejects } from '../../testkit/rejects';
import { freshDbPath, freshDir } from '../support/tmp';

// R6.1: the drivers' own conventions at the opening boundary. node-postgres: a PoolConfig
// passes through, pool errors reach the caller's onError, connection failures are typed.
// better-sqlite3: a Database the caller opened can be injected and stays the caller's.

describe('R6.1 opening an authority: driver conventions and typed errors', function () {
  this.timeout(60_000);

  describe('PostgreSQL', () => {
    let db: TestDatabase;
    before(async () => {
      db = await createDatabase();
    });
    after(async () => {
      await db.drop();
    });

    it('R6.1 a connection string that is not a PostgreSQL URL is a ConnectionError (invalid_url) naming it, before any connection', async () => {
      const e = await rejects(openPostgresStartBarrier({ connectionString: 'notaurl' }));
      expect(e).to.be.instanceOf(ConnectionError);
      expect((e as ConnectionError).reason).to.equal('invalid_url');
      expect(e.message).to.include('"notaurl"');
      const secret = await rejects(openPostgresStartBarrier({ connectionString: 'mysql://user:hunter2@host/db' }));
      expect(secret.message).not.to.include('hunter2');
    });

    it('R6.1 a refused connection and a missing database are typed ConnectionErrors with the driver error as cause', async () => {
      const refused = (await rejects(openPostgresStartBarrier({ connectionString: 'postgres://postgres@127.0.0.1:1/x' }))) as ConnectionError;
      expect([refused.code, refused.reason]).to.deep.equal(['CONNECTION_FAILED', 'refused']);
      expect(refused.cause).to.be.instanceOf(Error);
      const missing = (await rejects(openPostgresStartBarrier({ connectionString: urlOf('sb_0000000000000000') }))) as ConnectionError;
      expect([missing.code, missing.reason]).to.deep.equal(['CONNECTION_FAILED', 'database_missing']);
    });

    it('R6.1 poolConfig passes through to pg (max, application_name) beside the connection string', async () => {
      const authority = await openPostgresStartBarrier({ connectionString: db.url, poolConfig: { max: 3, application_name: 'sb-pool-spec' } });
      try {
        expect((authority.pool as unknown as { options: { max: number } }).options.max).to.equal(3);
        const { rows } = await authority.pool.query<{ name: string }>('SELECT current_setting($1) AS name', ['application_name']);
        expect(rows[0]?.name).to.equal('sb-pool-spec');
      } finally {
        await authority.close();
      }
    });

    it('R6.1 an error of the authority own pool (an idle connection the server ends) reaches onError, never swallowed', async () => {
      let report: (e: Error) => void = () => undefined;
      const reported = new Promise<Error>((resolve) => (report = resolve));
      const authority = await openPostgresStartBarrier({ connectionString: db.url, onError: (e) => report(e), poolConfig: { application_name: 'sb-onerror-spec' } });
      try {
        await authority.pool.query('SELECT 1'); // leaves one idle connection in the pool
        await db.admin((c) => c.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'sb-onerror-spec'`));
        const error = await reported;
        expect(error).to.be.instanceOf(Error);
        expect(error.message).to.match(/terminat/i);
      } finally {
        await authority.close();
      }
    });
  });

  describe('SQLite', () => {
    it('R6.1 an injected better-sqlite3 Database is migrated and used, and closing the authority leaves it open for its owner', async () => {
      const database = new Database(freshDbPath('sb-inject'));
      try {
        const authority = await openSqliteStartBarrier({ database });
        const s = buildScenario();
        for (const c of s.lifecycle) await authority.runs.handle(c);
        expect((await authority.barriers.prepare(s.startCommand())).outcome).to.equal('created');
        await authority.close();
        expect(database.open).to.equal(true);
        expect(database.prepare('SELECT count(*) AS n FROM tool_execution_start_barriers').get()).to.deep.equal({ n: 1 });
      } finally {
        database.close();
      }
    });

    it('R6.1 a closed injected Database, or a file that cannot be opened, is a typed ConnectionError', async () => {
      const closed = new Database(':memory:');
      closed.close();
      expect(await rejects(openSqliteStartBarrier({ database: closed }))).to.be.instanceOf(ConnectionError);
      const unopenable = await rejects(openSqliteStartBarrier({ path: join(freshDir('sb-nodir'), 'missing', 'dir', 'barrier.db') }));
      expect(unopenable).to.be.instanceOf(ConnectionError);
      expect(unopenable.message).to.include('missing');
    });
  });
});
