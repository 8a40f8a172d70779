import { Pool } from 'pg';
import { buildScenario } from '../../domain/scenario';
import { openPostgresStartBarrier } from '../../infrastructure/postgres';
import { seedReadyRuns } from './bulk';

// The server CPU a start spends in the database's own checks (R9.1: the PL/pgSQL trigger, turn
// and gate functions), which the bare same-rows transaction never runs (it writes with the
// triggers off). Counted by PostgreSQL itself (track_functions, pg_stat_user_functions), on a
// pool of its own after the timed rounds, so that counting costs them nothing.

export interface CheckShare {
  readonly starts: number;
  /** Self time of every ql3 function per start, µs. */
  readonly usPerStart: number;
  /** The same, by function, largest first. */
  readonly byFunction: Readonly<Record<string, number>>;
}

const SELF_TIMES = `SELECT funcname AS name, self_time FROM pg_stat_user_functions WHERE schemaname = 'ql3'`;
/** Functions that write a start's rows rather than check them: the bare transaction writes the same rows itself (none today: each identity is its fact's own key). */
const ROW_WRITERS: ReadonlySet<string> = new Set<string>();

const selfTimes = async (pool: Pool): Promise<Map<string, number>> => {
  const { rows } = await pool.query<{ name: string; self_time: number }>(SELF_TIMES);
  return new Map(rows.map((r) => [r.name, Number(r.self_time)]));
};

/** `starts` new starts on fresh Runs at one client; undefined when the server will not count (track_functions needs a superuser). */
export const pgCheckShare = async (url: string, starts: number): Promise<CheckShare | undefined> => {
  const plain = new Pool({ connectionString: url, max: 1 });
  const tracked = new Pool({ connectionString: url, max: 1, options: '-c track_functions=pl' });
  let trackedOpen = true;
  try {
    await (await openPostgresStartBarrier({ pool: plain })).close(); // the schema, made or checked untracked
    const scenarios = Array.from({ length: starts }, () => buildScenario());
    await seedReadyRuns(plain, scenarios);
    try {
      await tracked.query('SELECT 1');
    } catch {
      return undefined;
    }
    const a = await openPostgresStartBarrier({ pool: tracked });
    const before = await selfTimes(plain);
    for (const s of scenarios) await a.barriers.prepare(s.startCommand());
    await a.close();
    // A backend reports its function counts when it ends (or at most once a second).
    await tracked.end();
    trackedOpen = false;
    await new Promise((r) => setTimeout(r, 300));
    const after = await selfTimes(plain);
    const byFunction = [...after]
      .map(([name, ms]): [string, number] => [name, ((ms - (before.get(name) ?? 0)) * 1000) / starts])
      .filter(([name, v]) => v > 0 && !ROW_WRITERS.has(name))
      .sort(([, x], [, y]) => y - x);
    return { starts, usPerStart: byFunction.reduce((sum, [, v]) => sum + v, 0), byFunction: Object.fromEntries(byFunction) };
  } finally {
    if (trackedOpen) await tracked.end().catch(() => undefined);
    await plain.end();
  }
};
