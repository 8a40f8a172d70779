import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Pool, escapeIdentifier, escapeLiteral } from 'pg';
import { openPostgresStartBarrier, type PostgresStartBarrier, type PostgresStartBarrierOptions } from '../infrastructure/postgres';
export { rejects } from './rejects';
import { afterRun } from './afterRun';

// Every PostgreSQL spec runs against the real server on 127.0.0.1:5432 (trust auth), in a
// database created for it and dropped after it. Never mocked, never skipped: an unreachable
// server fails the run with the command that starts it.

export const ADMIN_URL = process.env.SB_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const HOW_TO_START = (): string => {
  const url = new URL(ADMIN_URL);
  return (
    `PostgreSQL is not reachable at ${url.hostname}:${url.port || '5432'} (user ${url.username || 'postgres'}, trust auth). Start it with:\n` +
    '  pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start\n' +
    '(install it with `apt-get install -y postgresql` if /etc/postgresql does not exist; .ci/run does both).'
  );
};

const withAdmin = async <T>(body: (c: Client) => Promise<T>, database = 'postgres'): Promise<T> => {
  const url = new URL(ADMIN_URL);
  url.pathname = `/${database}`;
  const client = new Client({ connectionString: url.toString(), connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
  } catch (e) {
    throw new Error(`${HOW_TO_START()}\n(cause: ${e instanceof Error ? e.message : String(e)})`);
  }
  try {
    return await body(client);
  } finally {
    await client.end();
  }
};

/** Database names are ours (random hex), validated before they reach DDL, which cannot bind them. */
const DB_NAME = /^sb_[0-9a-f]{16}(?:_tpl)?$/;
const ident = (name: string): string => {
  if (!DB_NAME.test(name)) throw new Error(`refusing database name ${name}`);
  return `"${name}"`;
};

/** This run's name: every database it makes is sb_<random><run>, so whatever is left of it can be found. */
const SHARED = process.env.SB_TEST_RUN !== undefined && /^[0-9a-f]{8}$/.test(process.env.SB_TEST_RUN);
const RUN = SHARED ? process.env.SB_TEST_RUN! : randomBytes(4).toString('hex');

/** Tells the run's teardown that this run made databases (the unit tier never touches the server). */
const markRunUsed = (): void => {
  if (SHARED) writeFileSync(runMarker(RUN), '');
};
export const runMarker = (run: string): string => join(tmpdir(), `sb-test-run-${run}.pg`);

/** Drops every database of a run (after its last spec: the template, idle clones, anything a killed spec left). */
export const dropRunDatabases = async (run: string): Promise<void> => {
  if (!/^[0-9a-f]{8}$/.test(run)) throw new Error(`refusing run name ${run}`);
  await withAdmin(async (c) => {
    const { rows } = await c.query<{ name: string }>(`SELECT datname AS name FROM pg_database WHERE datname ~ $1`, [`^sb_[0-9a-f]{8}${run}(_tpl)?$`]);
    for (const { name } of rows) await c.query(`DROP DATABASE IF EXISTS ${ident(name)} WITH (FORCE)`);
  });
};

export const urlOf = (database: string): string => {
  const url = new URL(ADMIN_URL);
  url.pathname = `/${database}`;
  return url.toString();
};

export interface TestDatabase {
  readonly name: string;
  readonly url: string;
  /** A superuser connection to this database (the owner's tools: corruption, grants). */
  admin<T>(body: (c: Client) => Promise<T>): Promise<T>;
  drop(): Promise<void>;
}

const make = (name: string): TestDatabase => ({
  name,
  url: urlOf(name),
  admin: (body) => withAdmin(body, name),
  drop: () => withAdmin(async (c) => void (await c.query(`DROP DATABASE IF EXISTS ${ident(name)} WITH (FORCE)`))),
});

/** A fresh, empty database (no schema: migrations are the spec's business). */
export const createDatabase = async (template?: string): Promise<TestDatabase> => {
  const name = `sb_${randomBytes(4).toString('hex')}${RUN}`;
  markRunUsed();
  await withAdmin(async (c) => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await c.query(`CREATE DATABASE ${ident(name)}${template ? ` TEMPLATE ${ident(template)}` : ''}`);
      } catch (e) {
        // 55006: a session (autovacuum) is on the template for a moment; wait it out, then give up.
        if ((e as { code?: string }).code !== '55006' || attempt >= 20) throw e;
        await new Promise((r) => setTimeout(r, 100 * attempt));
      }
    }
  });
  return make(name);
};

// One migrated template per test run, made on first use. Under mocha the run is named by
// testkit/mochaHooks.ts (SB_TEST_RUN, inherited by parallel workers and child processes): every
// database of the run is named sb_<random><run>, the template is made once by whichever process
// asks first (under an advisory lock) and shared by all of them, and the parent drops the
// run's databases after the last spec (dropRunDatabases). A process outside mocha has a run
// of its own and drops what it made at runAfterRun. A clone a spec has finished with is emptied
// and handed to the next spec of the same process that asks, so a run migrates once and
// creates a handful of databases per process, not one per test. Emptying is trusted only when
// the schema, grants and migration rows still read exactly as the template's: a spec that
// damaged anything else leaves a database that is dropped, never reused.

/** Everything a spec could change besides the rows of the tables a migration leaves empty. */
const FINGERPRINT = `
  WITH ns AS (SELECT oid, nspname FROM pg_namespace WHERE nspname NOT IN ('pg_catalog', 'information_schema') AND nspname NOT LIKE 'pg\\_to%' AND nspname NOT LIKE 'pg\\_temp%')
  SELECT md5(string_agg(x, E'\n' ORDER BY x)) AS fingerprint FROM (
    SELECT 'ns ' || nspname || ' ' || coalesce(n.nspacl::text, '') AS x FROM pg_namespace n WHERE n.oid IN (SELECT oid FROM ns)
    UNION ALL SELECT 'rel ' || c.oid::regclass::text || ' ' || c.relkind::text || ' ' || coalesce(c.relacl::text, '') || ' ' || c.relrowsecurity::text || ' ' || c.relforcerowsecurity::text || ' ' || c.relpersistence::text || ' ' || coalesce(c.reloptions::text, '') || ' ' || c.relreplident::text FROM pg_class c WHERE c.relnamespace IN (SELECT oid FROM ns)
    UNION ALL SELECT 'col ' || a.attrelid::regclass::text || ' ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull::text || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '') || ' ' || coalesce(a.attacl::text, '') || ' ' || a.attidentity::text || ' ' || a.attgenerated::text || ' ' || a.attcollation::text || ' ' || a.attstorage::text || ' ' || a.attcompression::text
      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
      WHERE c.relnamespace IN (SELECT oid FROM ns) AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL SELECT 'trg ' || pg_get_triggerdef(t.oid) || ' ' || t.tgenabled::text FROM pg_trigger t WHERE NOT t.tgisinternal
    UNION ALL SELECT 'con ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid) || ' ' || convalidated::text FROM pg_constraint WHERE connamespace IN (SELECT oid FROM ns)
    UNION ALL SELECT 'idx ' || pg_get_indexdef(i.indexrelid) || ' ' || i.indisvalid::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relnamespace IN (SELECT oid FROM ns)
    UNION ALL SELECT 'fn ' || p.oid::regprocedure::text || ' ' || md5(p.prosrc) || ' ' || p.prosecdef::text || ' ' || coalesce(p.proacl::text, '') || ' ' || coalesce(array_to_string(p.proconfig, ','), '') || ' ' || pg_get_userbyid(p.proowner) || ' ' || p.provolatile::text || ' ' || p.proleakproof::text || ' ' || p.proisstrict::text || ' ' || p.proparallel::text || ' ' || pg_get_function_result(p.oid) FROM pg_proc p WHERE p.pronamespace IN (SELECT oid FROM ns)
    UNION ALL SELECT 'pol ' || polrelid::regclass::text || ' ' || polname FROM pg_policy
    UNION ALL SELECT 'rule ' || schemaname || '.' || tablename || ' ' || rulename FROM pg_rules WHERE schemaname NOT IN ('pg_catalog')
    UNION ALL SELECT 'type ' || t.oid::regtype::text || ' ' || t.typtype::text || ' ' || coalesce(t.typacl::text, '') FROM pg_type t WHERE t.typnamespace IN (SELECT oid FROM ns)
    UNION ALL SELECT 'enum ' || enumtypid::regtype::text || ' ' || enumlabel FROM pg_enum
    UNION ALL SELECT 'seq ' || seqrelid::regclass::text || ' ' || seqincrement::text || ' ' || seqmin::text || ' ' || seqmax::text || ' ' || seqcycle::text FROM pg_sequence
    UNION ALL SELECT 'ext ' || extname || ' ' || extversion FROM pg_extension
    UNION ALL SELECT 'owner ' || c.oid::regclass::text || ' ' || pg_get_userbyid(c.relowner) FROM pg_class c WHERE c.relnamespace IN (SELECT oid FROM ns)
    UNION ALL SELECT 'set ' || setrole || ' ' || array_to_string(setconfig, ',') FROM pg_db_role_setting WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
    UNION ALL SELECT 'db ' || coalesce(datacl::text, '') || ' ' || datallowconn::text || ' ' || datconnlimit::text FROM pg_database WHERE datname = current_database()
    UNION ALL SELECT 'migration ' || m::text FROM ql3.schema_migrations m
    UNION ALL SELECT 'capability ' || k::text FROM ql3.capabilities k
  ) s`;

interface Template {
  readonly db: TestDatabase;
  readonly fingerprint: string;
  /** The ql3 tables a fresh migration leaves empty: the ones a reset truncates. */
  readonly emptied: readonly string[];
}

const fingerprintOf = async (c: Client): Promise<string> => (await c.query<{ fingerprint: string }>(FINGERPRINT)).rows[0]!.fingerprint;

/**
 * The run's migrated template, made once: the first process to take the run's advisory lock
 * migrates it and closes it to connections (the mark that it is whole: a half-made one left by
 * a killed process is made again), the others find it so.
 */
const sharedTemplate = async (): Promise<TestDatabase> => {
  const db = make(`sb_00000000${RUN}_tpl`);
  markRunUsed();
  const ready = (c: Client) => c.query<{ ok: boolean }>(`SELECT NOT datallowconn AS ok FROM pg_database WHERE datname = $1`, [db.name]).then((r) => r.rows[0]?.ok);
  await withAdmin(async (c) => {
    await c.query(`SELECT pg_advisory_lock(hashtext($1))`, [db.name]);
    try {
      const state = await ready(c);
      if (state === true) return;
      if (state === false) await c.query(`DROP DATABASE ${ident(db.name)} WITH (FORCE)`);
      await c.query(`CREATE DATABASE ${ident(db.name)}`);
      await (await openPostgresStartBarrier({ connectionString: db.url })).close();
      await c.query(`ALTER DATABASE ${ident(db.name)} WITH ALLOW_CONNECTIONS false`);
    } finally {
      await c.query(`SELECT pg_advisory_unlock(hashtext($1))`, [db.name]);
    }
  });
  return db;
};

let template: Promise<Template> | undefined;
const migratedTemplate = (): Promise<Template> =>
  (template ??= (async () => {
    const db = await sharedTemplate();
    if (!SHARED) {
      afterRun(async () => {
        template = undefined;
        for (const clone of idle.splice(0)) await clone.drop();
        await db.drop();
      });
    }
    // The template takes no connections: its figures are read on a first clone, which reads as it does.
    const first = await createDatabase(db.name);
    const read = await first.admin(async (c) => {
      const counts = await countRows(c);
      return { fingerprint: await fingerprintOf(c), emptied: Object.keys(counts).filter((t) => counts[t] === 0) };
    });
    idle.push(first);
    return { db, ...read };
  })());

/** Clones handed back, emptied and checked, waiting for the next spec. */
const idle: TestDatabase[] = [];

/** Empties a used clone; true when it then reads exactly as the template. */
const reset = async (db: TestDatabase, t: Template): Promise<boolean> =>
  db
    .admin(async (c) => {
      await c.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`);
      await c.query(`SET lock_timeout = '2s'`);
      // Replica role: the append-only tables' no-truncate triggers stand aside for the test harness.
      await c.query(`SET session_replication_role = replica`);
      if (t.emptied.length > 0) await c.query(`TRUNCATE ${t.emptied.map((n) => `ql3.${escapeIdentifier(n)}`).join(', ')} RESTART IDENTITY`);
      await c.query(`RESET session_replication_role`);
      return (await fingerprintOf(c)) === t.fingerprint;
    })
    .catch(() => false);

/** Fresh databases at the current schema for the specs of one suite; `dropAll` hands back what is left. */
export class MigratedTemplate {
  private readonly clones = new Set<TestDatabase>();

  async clone(): Promise<TestDatabase> {
    const t = await migratedTemplate();
    const db = idle.pop() ?? (await createDatabase(t.db.name));
    let done: Promise<void> | undefined;
    const handed: TestDatabase = {
      ...db,
      drop: () =>
        (done ??= (async () => {
          this.clones.delete(handed);
          if (await reset(db, t)) idle.push(db);
          else await db.drop();
        })()),
    };
    this.clones.add(handed);
    return handed;
  }

  async dropAll(): Promise<void> {
    for (const db of [...this.clones]) await db.drop();
  }
}

/**
 * A pool for specs. `pool.end()` resolves before its sockets close, so dropping the database
 * right after can terminate a connection still closing; the listener keeps that harmless.
 */
export const testPool = (config: ConstructorParameters<typeof Pool>[0]): Pool => {
  const pool = new Pool(config);
  pool.on('error', () => undefined);
  return pool;
};

export const openOn = (db: TestDatabase, options: Partial<PostgresStartBarrierOptions> = {}): Promise<PostgresStartBarrier> =>
  openPostgresStartBarrier({ ...options, connectionString: db.url } as PostgresStartBarrierOptions);

/**
 * `n` authorities on a migrated database, each with its own pool (its own server connections),
 * connected before a race starts; each is pushed to `opened` for the caller to close.
 */
export const openRacers = async (db: TestDatabase, n: number, opened: PostgresStartBarrier[], options: Partial<PostgresStartBarrierOptions> = {}): Promise<PostgresStartBarrier[]> => {
  const list = await Promise.all(Array.from({ length: n }, () => openOn(db, { migrate: false, ...options })));
  await Promise.all(list.map((a) => a.runs.getStepRun('warm-up', 'warm-up')));
  opened.push(...list);
  return list;
};

/** The tables this backend's migrations create (later migrations may add more). */
export const TABLES = [
  'schema_migrations',
  'streams',
  'events',
  'runs',
  'step_runs',
  'security_audit_events',
  'trace_anchors',
  'audit_receipts',
  'step_run_mutations',
  'tool_execution_start_barriers',
  'capabilities',
] as const;

export type RowCounts = Record<string, number>;

/**
 * The row count of every table of schema ql3, found in the catalog (so a table added by a
 * later migration is counted too). Names come from the catalog, quoted; no value is spliced.
 */
export const countRows = async (pool: Pool | Client): Promise<RowCounts> => {
  const tables = (await pool.query<{ t: string }>(`SELECT tablename AS t FROM pg_tables WHERE schemaname = 'ql3' ORDER BY 1`)).rows.map((r) => r.t);
  const sql = tables.map((t) => `SELECT ${escapeLiteral(t)} AS t, count(*)::int AS n FROM ql3.${escapeIdentifier(t)}`).join(' UNION ALL ');
  const { rows } = await pool.query<{ t: string; n: number }>(sql);
  return Object.fromEntries(rows.map((r) => [r.t, r.n]));
};

/** A count that must exist (noUncheckedIndexedAccess-friendly). */
export const countOf = (counts: RowCounts, table: string): number => {
  const n = counts[table];
  if (n === undefined) throw new Error(`no table ql3.${table}`);
  return n;
};

/** Sessions of this database waiting on a lock: proof that a racer is parked where we expect. */
export const waitForLockWaiters = async (db: TestDatabase, count: number, timeoutMs = 5000): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  await db.admin(async (c) => {
    for (;;) {
      const { rows } = await c.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      if ((rows[0]?.n ?? 0) >= count) return;
      if (Date.now() > deadline) throw new Error(`expected ${count} sessions waiting on a lock, saw ${rows[0]?.n ?? 0}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  });
};

