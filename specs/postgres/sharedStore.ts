import type { Client } from 'pg';
import type { ToolExecutionStartCommand } from '../../domain';
import { buildScenario, type Scenario } from '../../domain/scenario';
import type { PostgresStartBarrier, PostgresStartBarrierOptions } from '../../infrastructure/postgres';
import { createDatabase, openOn, openRacers, type TestDatabase } from '../../testkit/postgresHarness';
import { stepRunsOfOneRun } from '../../testkit/stepRunsOfOneRun';

// What the PostgreSQL specs that race real connections share: one fresh database per describe
// block, its main authority, racers each on their own pool (closed after the block), Runs made
// ready through the main authority, and a login that holds locks without any ql3 right.

export interface SharedStore {
  readonly db: TestDatabase;
  readonly main: PostgresStartBarrier;
  /** `n` authorities, each with its own pool, connected before the race starts. */
  clients(n: number, options?: Partial<PostgresStartBarrierOptions>): Promise<PostgresStartBarrier[]>;
  /** A fresh scenario whose StepRun is ready to start (its lifecycle handled by the main authority). */
  ready(options?: Parameters<typeof buildScenario>[0]): Promise<Scenario>;
  /** `n` such scenarios, each its own Run. */
  readyRuns(n: number): Promise<Scenario[]>;
  /** `n` more ready StepRuns of the scenario's Run (ids tagged `tag`), and a start command for each. */
  stepRunsOfOneRun(s: Scenario, n: number, tag: string): Promise<ToolExecutionStartCommand[]>;
  /**
   * A client with no retries whose first start of the Run meets a 40001 it cannot avoid: right
   * after its snapshot (the 'lock' step) another session moves the Run's stream head.
   */
  loserOfAMovedHead(runId: string): Promise<PostgresStartBarrier>;
}

/** Registers the block's before and after hooks: call it inside `describe`, before any other hook. */
export const sharedStore = (mainOptions: Partial<PostgresStartBarrierOptions> = {}): SharedStore => {
  let db: TestDatabase | undefined;
  let main: PostgresStartBarrier | undefined;
  const opened: PostgresStartBarrier[] = [];
  before(async () => {
    db = await createDatabase();
    main = await openOn(db, mainOptions);
  });
  after(async () => {
    for (const a of opened.splice(0)) await a.close();
    await main?.close();
    await db?.drop();
  });
  const store: SharedStore = {
    get db() {
      if (db === undefined) throw new Error('the shared store is opened in a before hook');
      return db;
    },
    get main() {
      if (main === undefined) throw new Error('the shared store is opened in a before hook');
      return main;
    },
    clients: (n, options = {}) => openRacers(store.db, n, opened, options),
    ready: async (options = {}) => {
      const s = buildScenario(options);
      for (const c of s.lifecycle) await store.main.runs.handle(c);
      return s;
    },
    readyRuns: async (n) => {
      const list: Scenario[] = [];
      for (let i = 0; i < n; i++) list.push(await store.ready());
      return list;
    },
    stepRunsOfOneRun: (s, n, tag) => stepRunsOfOneRun(store.main, s, n, tag),
    loserOfAMovedHead: async (runId) => {
      let interfered = false;
      const [loser] = await store.clients(1, {
        maxRetries: 0,
        hooks: {
          onStartStep: async (step) => {
            if (step !== 'lock' || interfered) return;
            interfered = true;
            await store.db.admin((c) => c.query('UPDATE ql3.streams SET version = version WHERE stream_id = $1', [`run-${runId}`]));
          },
        },
      });
      return loser!;
    },
  };
  return store;
};

/** A role with CONNECT only on the test database (no ql3 right), for `body`; dropped after. */
export const withStranger = async <T>(db: TestDatabase, prefix: string, body: (role: string) => Promise<T>): Promise<T> => {
  const stranger = `${prefix}_${process.pid}_${Date.now()}`;
  await db.admin(async (c) => {
    await c.query(`CREATE ROLE ${stranger} NOLOGIN`);
    await c.query(`GRANT CONNECT ON DATABASE ${c.escapeIdentifier(db.name)} TO ${stranger}`);
  });
  try {
    return await body(stranger);
  } finally {
    await db.admin(async (c) => {
      await c.query(`REVOKE CONNECT ON DATABASE ${c.escapeIdentifier(db.name)} FROM ${stranger}`);
      await c.query(`DROP ROLE ${stranger}`);
    });
  }
};

/**
 * A session as `role` holding a session lock on each advisory key (`$1` in a statement is the
 * Run id) while `body` runs; the locks are released and the role reset after.
 */
export const holdingAdvisoryLocks = async (db: TestDatabase, role: string, runId: string, locks: readonly string[], body: (holder: Client) => Promise<void>): Promise<void> =>
  db.admin(async (holder) => {
    await holder.query(`SET ROLE ${role}`);
    try {
      for (const sql of locks) await holder.query(sql, sql.includes('$1') ? [runId] : []);
      await body(holder);
    } finally {
      await holder.query('SELECT pg_advisory_unlock_all()');
      await holder.query('RESET ROLE');
    }
  });
