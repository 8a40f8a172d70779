import { randomBytes } from 'node:crypto';
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
  const name = `sb_${randomBytes(8).toString('hex')}`;
  await withAdmin((c) => c.query(`CREATE DATABASE ${ident(name)}${template ? ` TEMPLATE ${ident(template)}` : ''}`));
  return make(name);
};

// One migrated template per test process, made on first use and dropped after the last spec
// (testkit/mochaHooks.ts): every clone is a fresh database at the current schema in ~0.2 s,
// and the migrations run once per run instead of once per suite.
let template: Promise<TestDatabase> | undefined;
const migratedTemplate = (): Promise<TestDatabase> =>
  (template ??= (async () => {
    const name = `sb_${randomBytes(8).toString('hex')}_tpl`;
    await withAdmin((c) => c.query(`CREATE DATABASE ${ident(name)}`));
    const db = make(name);
    afterRun(() => db.drop());
    const a = await openPostgresStartBarrier({ connectionString: db.url });
    await a.close();
    return db;
  })());

/** Clones of the run's migrated template; `dropAll` drops the clones this instance made. */
export class MigratedTemplate {
  private readonly clones: TestDatabase[] = [];

  async clone(): Promise<TestDatabase> {
    const db = await createDatabase((await migratedTemplate()).name);
    this.clones.push(db);
    return db;
  }

  async dropAll(): Promise<void> {
    for (const db of this.clones.splice(0)) await db.drop();
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
  'start_replay_identities',
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

