import { expect } from 'chai';
import { Pool } from 'pg';
import { MigrationError, type Migration } from '../../infrastructure/migrations';
import { loadMigrations, checksumOf } from '../../infrastructure/migrations';
import { migratePostgres, openPostgresStartBarrier } from '../../infrastructure/postgres';
import { buildScenario } from '../../domain/scenario';
import { countOf, countRows, createDatabase, openOn, rejects, TABLES, testPool, type TestDatabase } from '../../testkit/postgresHarness';

// R5.2: schema ql3 by forward-only, checksummed migrations; the six roles of the ADR's
// integration, each proven by connecting as it (SET ROLE through the startup options), never
// by reading the catalog alone.

const PRODUCT_ROLES = ['ql3_admin', 'ql3_reader', 'ql3_worker_ingress', 'ql3_package_executor'] as const;
const ALL_ROLES = ['ql3_owner', 'ql3_runtime', ...PRODUCT_ROLES] as const;
const FACT_TABLES = ['events', 'security_audit_events', 'trace_anchors', 'audit_receipts', 'step_run_mutations', 'tool_execution_start_barriers'] as const;
const HEAD_TABLES = ['streams', 'runs', 'step_runs'] as const;

describe('PostgreSQL schema and roles (R5.2)', function () {
  this.timeout(60_000);

  describe('migrations', () => {
    let db: TestDatabase;
    beforeEach(async () => {
      db = await createDatabase();
    });
    afterEach(async () => {
      await db.drop();
    });

    it('R5.2 applies every migration to an empty database: schema ql3, tables, pg-0030, control-core v29', async () => {
      const a = await openOn(db);
      await a.close();
      await db.admin(async (c) => {
        const applied = (await c.query<{ name: string }>('SELECT name FROM ql3.schema_migrations ORDER BY name')).rows.map((r) => r.name);
        expect(applied).to.deep.equal(loadMigrations('postgres').map((m) => m.name));
        expect(applied).to.include('pg-0030-tool-execution-start-barriers');
        const tables = (await c.query<{ t: string }>(`SELECT tablename AS t FROM pg_tables WHERE schemaname = 'ql3' ORDER BY 1`)).rows.map((r) => r.t);
        expect(tables).to.include.members([...TABLES]);
        const owners = (await c.query<{ o: string }>(`SELECT DISTINCT tableowner AS o FROM pg_tables WHERE schemaname = 'ql3'`)).rows.map((r) => r.o);
        expect(owners).to.deep.equal(['ql3_owner']);
        expect((await c.query(`SELECT version FROM ql3.capabilities WHERE name = 'control-core'`)).rows).to.deep.equal([{ version: '29' }]);
        // each identity is a unique key of the fact that holds it (R6.4's constant-cost lookup): the attempt's is the barrier's
        const idx = await c.query<{ def: string }>(`SELECT indexdef AS def FROM pg_indexes WHERE schemaname = 'ql3' AND indexname = 'tool_execution_start_barriers_attempt_key'`);
        expect(idx.rows[0]?.def).to.match(/CREATE UNIQUE INDEX .* \(run_id, step_run_id, started_step_run_version\)/);
        expect(tables).to.not.include('start_replay_identities');
        // foreign keys from the barrier to StepRun, mutation, RunEvent, Trace, Audit event, Audit receipt
        const fks = await c.query<{ target: string }>(
          `SELECT confrelid::regclass::text AS target FROM pg_constraint WHERE conrelid = 'ql3.tool_execution_start_barriers'::regclass AND contype = 'f' ORDER BY 1`,
        );
        expect(fks.rows.map((r) => r.target)).to.have.members([
          'ql3.audit_receipts',
          'ql3.events',
          'ql3.security_audit_events',
          'ql3.step_run_mutations',
          'ql3.step_runs',
          'ql3.trace_anchors',
        ]);
        const roles = (await c.query<{ r: string }>(`SELECT rolname AS r FROM pg_roles WHERE rolname LIKE 'ql3\\_%'`)).rows.map((r) => r.r);
        expect(roles).to.include.members([...ALL_ROLES]);
      });
    });

    it('R5.2 the events JSON is compressed with lz4 when the server has it, pglz (the default) when not', async () => {
      const a = await openOn(db);
      await a.close();
      await db.admin(async (c) => {
        const lz4 = await c.query(`SELECT set_config('default_toast_compression', 'lz4', true)`).then(
          () => true,
          () => false,
        );
        const { rows } = await c.query<{ m: string }>(`SELECT attcompression::text AS m FROM pg_attribute WHERE attrelid = 'ql3.events'::regclass AND attname = 'data_json'`);
        expect(rows[0]?.m).to.equal(lz4 ? 'l' : '');
      });
    });

    it('R5.2 re-opening is a no-op, and concurrent migrators apply each file exactly once (the ledger table lock, R13.1)', async () => {
      const opened = await Promise.all(Array.from({ length: 4 }, () => openOn(db)));
      for (const a of opened) await a.close();
      const pool = testPool({ connectionString: db.url });
      try {
        const client = await pool.connect();
        try {
          expect((await migratePostgres(client)).applied).to.deep.equal([]);
        } finally {
          client.release();
        }
        const counts = await countRows(pool);
        expect(countOf(counts, 'schema_migrations')).to.equal(loadMigrations('postgres').length);
        expect(countOf(counts, 'capabilities')).to.equal(1);
      } finally {
        await pool.end();
      }
    });

    it('R5.2 an edited applied migration, a newer database or a reordered history is refused, and nothing is applied', async () => {
      const known = loadMigrations('postgres');
      const pool = testPool({ connectionString: db.url });
      try {
        const client = await pool.connect();
        try {
          // the first three only, then the code "forgets" pg-0030: the database is newer than the code
          await migratePostgres(client, known.slice(0, 3));
          const edited: Migration[] = known.map((m, i) => (i === 1 ? { ...m, sql: `${m.sql}\n-- edited`, checksum: checksumOf(`${m.sql}\n-- edited`) } : m));
          const e1 = await rejects(migratePostgres(client, edited));
          expect(e1).to.be.instanceOf(MigrationError);
          expect(e1.message).to.match(/was edited after it was applied/);
          await migratePostgres(client, known);
          const e2 = await rejects(migratePostgres(client, known.slice(0, 3)));
          expect(e2).to.be.instanceOf(MigrationError);
          expect(e2.message).to.match(/newer than the code/);
          const renamed = known.map((m, i) => (i === 2 ? { ...m, name: 'pg-0003-something-else' } : m));
          expect(await rejects(migratePostgres(client, renamed))).to.be.instanceOf(MigrationError);
        } finally {
          client.release();
        }
        expect(countOf(await countRows(pool), 'schema_migrations')).to.equal(known.length);
      } finally {
        await pool.end();
      }
    });

    it('R5.2 a failing migration rolls back entirely (transactional DDL) and names the file', async () => {
      const known = loadMigrations('postgres');
      const broken = [...known, { name: 'pg-9999-broken', sql: 'CREATE TABLE ql3.half_done (x int); SELECT no_such_function();', checksum: checksumOf('x') }];
      const pool = testPool({ connectionString: db.url });
      try {
        const client = await pool.connect();
        try {
          const e = await rejects(migratePostgres(client, broken));
          expect(e).to.be.instanceOf(MigrationError);
          expect(e.message).to.contain('pg-9999-broken');
          const present = await client.query(`SELECT to_regclass('ql3.half_done') AS t, to_regclass('ql3.events') AS e`);
          expect(present.rows[0]).to.deep.equal({ t: null, e: null });
        } finally {
          client.release();
        }
      } finally {
        await pool.end();
      }
    });

    it('R5.2 with migrate: false, a database nobody migrated is refused with the fix in the message', async () => {
      const e = await rejects(openPostgresStartBarrier({ connectionString: db.url, migrate: false }));
      expect(e).to.be.instanceOf(MigrationError);
      expect(e.message).to.match(/no start barrier schema .*ask the owner to run migrate/);
    });

    it('R5.2 only schema ql3 is accepted, and at most three retries', async () => {
      expect((await rejects(openPostgresStartBarrier({ connectionString: db.url, schema: 'public' }))).message).to.match(/schema must be "ql3"/);
      expect((await rejects(openPostgresStartBarrier({ connectionString: db.url, maxRetries: 4 }))).message).to.match(/at most three retries/);
    });

    it('R10.1 an unknown option (a misspelt connectionString, which pg would replace with its environment) or timeout is refused before anything connects', async () => {
      for (const [options, named] of [
        [{ conectionString: db.url }, '"conectionString"'],
        [{ connectionString: db.url, timeouts: { statementMS: 10 } }, '"statementMS"'],
        [{ connectionString: db.url, migrat: false }, '"migrat"'],
      ] as const) {
        const e = await rejects(openPostgresStartBarrier(options as never));
        expect(e, JSON.stringify(options)).to.be.instanceOf(RangeError);
        expect(e.message).to.contain(`unknown option ${named}`);
      }
    });

    it('R10.1 an option that chooses a behaviour takes only a value that names one, before anything connects: migrate "false" (text) migrated, a misspelt writeMode ran stepwise, a pool beside a connection string won', async () => {
      const pool = new Pool({ connectionString: db.url, max: 1 });
      try {
        for (const [options, message] of [
          [{ connectionString: db.url, migrate: 'false' }, /migrate must be true or false, got "false"/],
          [{ connectionString: db.url, writeMode: 'batch' }, /writeMode must be "batched" or "stepwise", got "batch"/],
          [{ pool, connectionString: db.url }, /give it alone, not with connectionString/],
          [{ pool, onError: () => undefined }, /give it alone, not with onError/],
          [{ pool: { query: () => undefined } }, /pool must be a pg Pool/],
          [{ connectionString: db.url, onError: 'log' }, /onError must be a function/],
          [{ connectionString: db.url, hooks: { onAttemp: () => undefined } }, /unknown option "onAttemp"/],
          [{ connectionString: db.url, hooks: { onStartStep: 1 } }, /hooks.onStartStep must be a function/],
        ] as const) {
          const e = await rejects(openPostgresStartBarrier(options as never));
          expect(e, JSON.stringify(Object.keys(options))).to.be.instanceOf(RangeError);
          expect(e.message).to.match(message);
        }
      } finally {
        await pool.end();
      }
    });
  });

  describe('roles, each proven by connecting as it', () => {
    let db: TestDatabase;
    let pools: Pool[] = [];
    let startId: string;
    before(async () => {
      db = await createDatabase();
      const a = await openOn(db);
      const s = buildScenario();
      for (const c of s.lifecycle) await a.runs.handle(c);
      startId = (await a.barriers.prepare(s.startCommand())).barrier.record.startId;
      await a.close();
    });
    after(async () => {
      for (const p of pools) await p.end();
      pools = [];
      await db.drop();
    });

    /** A session whose current_user is `role` (the superuser login drops to it at startup). */
    const as = (role: string): Pool => {
      const pool = testPool({ connectionString: db.url, options: `-c role=${role}`, max: 1 });
      pools.push(pool);
      return pool;
    };
    /** The SQLSTATE of a statement, or 'ok'. Each runs in its own transaction, rolled back. */
    const attempt = async (pool: Pool, sql: string, params: unknown[] = []): Promise<string> => {
      const c = await pool.connect();
      try {
        await c.query('BEGIN');
        await c.query(sql, params);
        return 'ok';
      } catch (e) {
        return (e as { code?: string }).code ?? String(e);
      } finally {
        await c.query('ROLLBACK').catch(() => undefined);
        c.release();
      }
    };
    const DENIED = '42501'; // insufficient_privilege

    it('R5.2 every session really runs as its role', async () => {
      for (const role of ALL_ROLES) {
        const { rows } = await as(role).query<{ u: string; s: boolean }>(`SELECT current_user AS u, current_setting('is_superuser') = 'on' AS s`);
        expect(rows[0]).to.deep.equal({ u: role, s: false });
      }
    });

    it('R5.2 ql3_runtime: SELECT and INSERT on the barrier, never UPDATE, DELETE or TRUNCATE, on it or on any fact; a barrier may bind only facts of its own start (R4.1, R9.1)', async () => {
      const runtime = as('ql3_runtime');
      expect(await attempt(runtime, 'SELECT count(*) FROM ql3.tool_execution_start_barriers')).to.equal('ok');
      // INSERT on the barrier is granted: this one gets past the privilege check and fails only on the foreign key
      expect(
        await attempt(runtime, `INSERT INTO ql3.tool_execution_start_barriers (start_id) VALUES ('no-such-start')`),
      ).to.be.oneOf(['23502', '23503']);
      for (const table of FACT_TABLES) {
        expect(await attempt(runtime, `SELECT count(*) FROM ql3.${table}`), `SELECT ${table}`).to.equal('ok');
        expect(await attempt(runtime, `UPDATE ql3.${table} SET start_id = start_id`.replace('start_id = start_id', table === 'events' ? 'event_id = event_id' : 'start_id = start_id')), `UPDATE ${table}`).to.equal(DENIED);
        expect(await attempt(runtime, `DELETE FROM ql3.${table}`), `DELETE ${table}`).to.equal(DENIED);
        expect(await attempt(runtime, `TRUNCATE ql3.${table}`), `TRUNCATE ${table}`).to.equal(DENIED);
      }
      const { rows } = await runtime.query<Record<string, boolean>>(
        `SELECT has_table_privilege('ql3.tool_execution_start_barriers', 'SELECT') AS s, has_table_privilege('ql3.tool_execution_start_barriers', 'INSERT') AS i,
                has_table_privilege('ql3.tool_execution_start_barriers', 'UPDATE') AS u, has_table_privilege('ql3.tool_execution_start_barriers', 'DELETE') AS d,
                has_table_privilege('ql3.tool_execution_start_barriers', 'TRUNCATE') AS t, has_table_privilege('ql3.tool_execution_start_barriers', 'REFERENCES') AS r,
                has_table_privilege('ql3.tool_execution_start_barriers', 'TRIGGER') AS g`,
      );
      expect(rows[0]).to.deep.equal({ s: true, i: true, u: false, d: false, t: false, r: false, g: false });
    });

    it('R9.1 ql3_runtime: no UPDATE, DELETE or TRUNCATE on any ql3 table that holds data, no INSERT on the heads (the event trigger keeps them), no row lock of its own; no DDL', async () => {
      const runtime = as('ql3_runtime');
      for (const table of HEAD_TABLES) {
        expect(await attempt(runtime, `SELECT count(*) FROM ql3.${table}`), `SELECT ${table}`).to.equal('ok');
        expect(await attempt(runtime, `UPDATE ql3.${table} SET version = version`), `UPDATE ${table}`).to.equal(DENIED);
        expect(await attempt(runtime, `SELECT 1 FROM ql3.${table} FOR UPDATE`), `FOR UPDATE ${table}`).to.equal(DENIED);
        expect(await attempt(runtime, `DELETE FROM ql3.${table}`), `DELETE ${table}`).to.equal(DENIED);
        expect(await attempt(runtime, `INSERT INTO ql3.${table} DEFAULT VALUES`), `INSERT ${table}`).to.equal(DENIED);
      }
      const { rows } = await runtime.query<{ any: boolean }>(
        `SELECT bool_or(has_table_privilege(c.oid, p)) AS any FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           CROSS JOIN unnest(ARRAY['UPDATE', 'DELETE', 'TRUNCATE']) p WHERE n.nspname = 'ql3' AND c.relkind = 'r' AND c.relname <> 'start_gate'`,
      );
      expect(rows[0]?.any).to.equal(false);
      // The one exception: UPDATE on the start gate, the right LOCK TABLE asks for a
      // last attempt's exclusive lock. The gate has no column to set and no row; nothing can fill it.
      const gate = await runtime.query<{ columns: string; update: boolean; others: boolean }>(
        `SELECT (SELECT count(*) FROM pg_attribute WHERE attrelid = 'ql3.start_gate'::regclass AND attnum > 0 AND NOT attisdropped) AS columns,
                has_table_privilege('ql3.start_gate', 'UPDATE') AS update,
                has_table_privilege('ql3.start_gate', 'SELECT') OR has_table_privilege('ql3.start_gate', 'INSERT') OR has_table_privilege('ql3.start_gate', 'DELETE')
                  OR has_table_privilege('ql3.start_gate', 'TRUNCATE') OR has_table_privilege('ql3.start_gate', 'REFERENCES') OR has_table_privilege('ql3.start_gate', 'TRIGGER') AS others`,
      );
      expect(gate.rows[0]).to.deep.equal({ columns: '0', update: true, others: false });
      expect(await attempt(runtime, 'INSERT INTO ql3.start_gate DEFAULT VALUES')).to.equal(DENIED);
      expect(await attempt(runtime, 'DELETE FROM ql3.start_gate')).to.equal(DENIED);
      expect(await attempt(runtime, 'CREATE TABLE ql3.sneaky (x int)')).to.equal(DENIED);
      expect(await attempt(runtime, 'ALTER TABLE ql3.tool_execution_start_barriers DISABLE TRIGGER USER')).to.equal(DENIED);
      expect(await attempt(runtime, 'ALTER TABLE ql3.tool_execution_start_barriers DROP CONSTRAINT tool_execution_start_barriers_attempt_key')).to.equal(DENIED);
    });

    it('R9.1 every SECURITY DEFINER function pins search_path; a function without it (the inlined helpers of the event trigger) runs for no product role', async () => {
      const { rows } = await as('ql3_owner').query<{ f: string; definer: boolean; pinned: boolean; trigger: boolean }>(
        `SELECT p.oid::regprocedure::text AS f, p.prosecdef AS definer, p.prorettype = 'trigger'::regtype AS trigger,
                coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false) AS pinned
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'ql3' ORDER BY 1`,
      );
      expect(rows.filter((r) => r.definer && !r.pinned).map((r) => r.f)).to.deep.equal([]);
      // a trigger function runs only as a trigger, never called
      const unpinned = rows.filter((r) => !r.pinned && !r.trigger).map((r) => r.f);
      expect(unpinned).to.include.members(['ql3.tagged_digest(text,text)', 'ql3.step_run_json(jsonb,boolean)']);
      for (const role of ['ql3_runtime', ...PRODUCT_ROLES]) {
        for (const f of unpinned) {
          const { rows: can } = await as(role).query<{ x: boolean }>(`SELECT has_function_privilege($1, 'EXECUTE') AS x`, [f]);
          expect(can[0]?.x, `${role} may EXECUTE ${f}`).to.equal(false);
        }
      }
      expect(await attempt(as('ql3_runtime'), `SELECT ql3.tagged_digest('a', 'b')`)).to.equal(DENIED);
    });

    it('R5.2 no other product role has any right on the barrier table: not even SELECT', async () => {
      for (const role of PRODUCT_ROLES) {
        const pool = as(role);
        for (const table of ['tool_execution_start_barriers']) {
          expect(await attempt(pool, `SELECT count(*) FROM ql3.${table}`), `${role} SELECT ${table}`).to.equal(DENIED);
          expect(await attempt(pool, `INSERT INTO ql3.${table} DEFAULT VALUES`), `${role} INSERT ${table}`).to.equal(DENIED);
          expect(await attempt(pool, `UPDATE ql3.${table} SET start_id = start_id`), `${role} UPDATE ${table}`).to.equal(DENIED);
          expect(await attempt(pool, `DELETE FROM ql3.${table}`), `${role} DELETE ${table}`).to.equal(DENIED);
          expect(await attempt(pool, `TRUNCATE ql3.${table}`), `${role} TRUNCATE ${table}`).to.equal(DENIED);
        }
        const { rows } = await pool.query<{ any: boolean }>(
          `SELECT bool_or(has_table_privilege(t, p)) AS any
             FROM unnest(ARRAY['ql3.tool_execution_start_barriers']) t,
                  unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) p`,
        );
        expect(rows[0]?.any, role).to.equal(false);
        // nor a way around it: no fact table, no head to write
        for (const table of ['events', 'security_audit_events', 'trace_anchors', 'audit_receipts', 'step_run_mutations']) {
          expect(await attempt(pool, `SELECT count(*) FROM ql3.${table}`), `${role} SELECT ${table}`).to.equal(DENIED);
        }
        for (const table of HEAD_TABLES) expect(await attempt(pool, `UPDATE ql3.${table} SET version = version`), `${role} UPDATE ${table}`).to.equal(DENIED);
      }
    });

    it('R5.2 ql3_admin and ql3_reader read the Run read models; ql3_worker_ingress and ql3_package_executor read nothing here', async () => {
      for (const role of ['ql3_admin', 'ql3_reader']) {
        expect(await attempt(as(role), 'SELECT count(*) FROM ql3.runs'), role).to.equal('ok');
        expect(await attempt(as(role), 'SELECT count(*) FROM ql3.step_runs'), role).to.equal('ok');
      }
      expect(await attempt(as('ql3_admin'), 'SELECT count(*) FROM ql3.capabilities')).to.equal('ok');
      for (const role of ['ql3_worker_ingress', 'ql3_package_executor']) {
        for (const table of TABLES) expect(await attempt(as(role), `SELECT count(*) FROM ql3.${table}`), `${role} ${table}`).to.equal(DENIED);
      }
    });

    it('R6.4 facts are append-only even for the owner: UPDATE, DELETE and TRUNCATE are refused by triggers', async () => {
      const owner = as('ql3_owner');
      for (const table of FACT_TABLES) {
        const set = table === 'events' ? 'event_id = event_id' : 'start_id = start_id';
        expect(await attempt(owner, `UPDATE ql3.${table} SET ${set}`), `UPDATE ${table}`).to.equal('23000');
        expect(await attempt(owner, `DELETE FROM ql3.${table}`), `DELETE ${table}`).to.equal('23000');
        expect(await attempt(owner, `TRUNCATE ql3.${table} CASCADE`), `TRUNCATE ${table}`).to.equal('23000');
      }
    });

    it('R5.2 least privilege suffices: an authority whose session is ql3_runtime (migrate: false) runs lifecycle, start, replay and reads', async () => {
      const pool = as('ql3_runtime');
      const a = await openPostgresStartBarrier({ pool, migrate: false });
      const s = buildScenario();
      for (const c of s.lifecycle) await a.runs.handle(c);
      const command = s.startCommand();
      expect((await a.barriers.prepare(command)).outcome).to.equal('created');
      expect((await a.barriers.prepare(command)).outcome).to.equal('existing');
      expect((await a.barriers.getByStartId(startId))?.record.startId).to.equal(startId);
      expect((await a.barriers.getByStepRunAttempt(s.runId, s.stepRunId, 3))?.record.startId).to.equal(command.startId);
      expect((await a.runs.readStream(s.runId)).length).to.equal(8);
      await a.close();
      // and it cannot migrate: a runtime login is refused DDL
      const fresh = await createDatabase();
      try {
        const runtimeOnFresh = testPool({ connectionString: fresh.url, options: '-c role=ql3_runtime', max: 1 });
        try {
          const e = await rejects(openPostgresStartBarrier({ pool: runtimeOnFresh }));
          expect(e).to.be.instanceOf(MigrationError);
          // A login without the rights to create the schema: "ask the owner to run migrate".
          expect(e.message).to.match(/no start barrier schema and this login may not create it \((must have|permission denied)/);
          expect((await runtimeOnFresh.query(`SELECT to_regnamespace('ql3') AS s`)).rows[0]).to.deep.equal({ s: null });
        } finally {
          await runtimeOnFresh.end();
        }
      } finally {
        await fresh.drop();
      }
    });
  });
});
