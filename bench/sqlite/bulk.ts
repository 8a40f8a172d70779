import type Database from 'better-sqlite3';
import { streamNameOf } from '../../domain';
import type { Scenario } from '../../domain/scenario';
import { runRowOf, stepRunRowOf } from '../../projections/rows';
import { eventRowsOf, lifecycleOf, type EventRowIn, type StartWrite } from '../lib/startRows';
import type { LongRun } from '../lib/longRun';
import { FIELD_SEPARATOR, SEED_ROW_KINDS, STREAM } from './seedRows';
import * as SQL from './sql';

const HEAD_CHECK = 'events_step_run_from_head';

const STREAM_CODE = 48 + STREAM;
const SEPARATOR_CODE = FIELD_SEPARATOR.charCodeAt(0);

// Bulk writers over a raw better-sqlite3 connection to a database the authority migrated.
// Seeding writes exactly the rows the product would have written (derived by the domain), in
// large transactions, so setup stays far cheaper than what is measured.

/** Triggers that write a start's rows rather than check them (the in-doubt index): a store "without triggers" keeps them. */
export const ROW_WRITING_TRIGGERS: readonly string[] = ['in_doubt_starts_from_barrier', 'in_doubt_starts_leave_on_outcome'];

export class SqliteWriter {
  private readonly s: Record<keyof typeof SQL, Database.Statement | undefined>;
  private seedKinds: { table: string; stmt: Database.Statement; integer: boolean[]; width: number }[] | undefined;
  constructor(readonly db: Database.Database) {
    db.exec(SQL.CREATE_FLOOR);
    const entries = Object.entries(SQL)
      .filter(([k]) => k !== 'CREATE_FLOOR')
      .map(([k, sql]) => [k, db.prepare(sql)]);
    this.s = Object.fromEntries(entries) as Record<keyof typeof SQL, Database.Statement>;
  }

  private st(name: keyof typeof SQL): Database.Statement {
    return this.s[name]!;
  }

  /**
   * Seeding writes whole Runs at once: each head with its final state, then its events. The
   * SQLite check that a StepRun event starts from its head (0072) holds only for a writer that
   * moves heads event by event, as the product does; a seed is valid by construction (derived
   * by the domain, and read back through the verified read by the bench), so the check is
   * lifted while it is written and put back, with the same SQL, before the bench measures.
   */
  withoutHeadCheck<T>(body: () => T): T {
    const row = this.db.prepare("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?").get(HEAD_CHECK) as { sql: string } | undefined;
    if (row !== undefined) this.db.exec(`DROP TRIGGER ${HEAD_CHECK}`);
    const restore = () => void (row !== undefined && this.db.exec(row.sql));
    let result: T;
    try {
      result = body();
    } catch (e) {
      restore();
      throw e;
    }
    if (result instanceof Promise) return result.finally(restore) as T;
    restore();
    return result;
  }

  inTransaction(body: () => void): void {
    this.db.exec('BEGIN IMMEDIATE');
    try {
      this.withoutHeadCheck(body);
      this.db.exec('COMMIT');
    } catch (e) {
      if (this.db.inTransaction) this.db.exec('ROLLBACK');
      throw e;
    }
  }

  private events(rows: readonly EventRowIn[]): void {
    for (const e of rows) this.st('INSERT_EVENT').run(e);
  }

  /** Runs whose Tool StepRun is ready to start (the lifecycle of `buildScenario`). */
  readyRuns(scenarios: readonly Scenario[], committedAtMs = Date.now()): void {
    this.inTransaction(() => {
      for (const sc of scenarios) {
        const { events, state } = lifecycleOf(sc);
        const run = state.run!;
        this.st('INSERT_STREAM').run({ stream_id: streamNameOf(run.runId), stream_type: 'run', version: run.version });
        this.st('INSERT_RUN').run(runRowOf(run));
        for (const s of Object.values(state.stepRuns)) this.st('INSERT_STEP_RUN').run(stepRunRowOf(s));
        this.events(eventRowsOf(run.runId, 0, events, committedAtMs));
      }
    });
  }

  longRun(long: LongRun, committedAtMs = Date.now()): void {
    this.inTransaction(() => {
      const run = long.state.run!;
      this.st('INSERT_STREAM').run({ stream_id: streamNameOf(run.runId), stream_type: 'run', version: run.version });
      this.st('INSERT_RUN').run(runRowOf(run));
      for (const s of Object.values(long.state.stepRuns)) this.st('INSERT_STEP_RUN').run(stepRunRowOf(s));
      this.events(eventRowsOf(run.runId, 0, long.events, committedAtMs));
    });
  }

  /**
   * One batch of started Runs from the seed generator (lifecycle, the five facts, the barrier
   * whose insert writes its identities; see seedRows.ts for the format). Returns how many Runs it held.
   */
  seededBatch(rows: string): number {
    const kinds = (this.seedKinds ??= SEED_ROW_KINDS.map((k) => {
      const columns = new Map((this.db.prepare(`PRAGMA table_info(${k.table})`).all() as { name: string; type: string }[]).map((c) => [c.name, c.type]));
      const integer = k.names.map((n) => {
        const type = columns.get(n);
        if (type === undefined) throw new Error(`${k.table} has no column ${n}`);
        return type === 'INTEGER';
      });
      return { table: k.table, stmt: this.db.prepare(k.sql), integer, width: k.names.length };
    }));
    // Scanned item by item (no split): each value is a short-lived slice of the batch.
    const end = rows.length;
    let runs = 0;
    let p = 0;
    while (p < end) {
      const code = rows.charCodeAt(p + 1);
      const kind = rows.charCodeAt(p) === SEPARATOR_CODE && rows.charCodeAt(p + 2) === SEPARATOR_CODE ? kinds[code - 48] : undefined;
      if (kind === undefined) throw new Error(`malformed seed batch at offset ${p}`);
      p += 2;
      const args: (string | number)[] = new Array(kind.width);
      for (let j = 0; j < kind.width; j++) {
        if (rows.charCodeAt(p) !== SEPARATOR_CODE) throw new Error(`malformed seed batch: ${kind.table} row cut short at offset ${p}`);
        let q = rows.indexOf(FIELD_SEPARATOR, p + 1);
        if (q === -1) q = end;
        const v = rows.slice(p + 1, q);
        p = q;
        if (kind.integer[j]) {
          const n = Number(v);
          if (v === '' || !Number.isSafeInteger(n)) throw new Error(`malformed seed batch: ${kind.table} integer ${JSON.stringify(v.slice(0, 40))}`);
          args[j] = n;
        } else args[j] = v;
      }
      kind.stmt.run(args);
      if (code === STREAM_CODE) runs++;
    }
    return runs;
  }

  private startRows(w: StartWrite): void {
    this.st('INSERT_AUDIT').run(w.rows.audit);
    this.st('INSERT_TRACE').run(w.rows.trace);
    this.st('INSERT_RECEIPT').run(w.rows.receipt);
    this.st('INSERT_MUTATION').run(w.rows.mutation);
    this.st('INSERT_BARRIER').run(w.rows.barrier);
  }

  /** The bare baseline: one transaction inserting the same rows as a start, no reads, no checks. */
  bareStart(w: StartWrite): void {
    this.db.exec('BEGIN IMMEDIATE');
    try {
      // each head moves after the event that makes it, as the product writes (the history
      // triggers check that order)
      this.events(w.events.slice(0, 4));
      const runId = w.rows.barrier.run_id;
      this.st('UPDATE_STEP_RUN').run(w.stepRunAfter);
      this.events(w.events.slice(4));
      this.st('UPDATE_STREAM').run(w.runVersionAfter, streamNameOf(runId));
      this.st('UPDATE_RUN').run(w.runVersionAfter, runId);
      this.startRows(w);
      this.db.exec('COMMIT');
    } catch (e) {
      if (this.db.inTransaction) this.db.exec('ROLLBACK');
      throw e;
    }
  }

  /** The commit floor: `BEGIN IMMEDIATE; INSERT; COMMIT`. */
  floor(i: number): void {
    this.db.exec('BEGIN IMMEDIATE');
    this.st('INSERT_FLOOR').run(String(i));
    this.db.exec('COMMIT');
  }

  get(startId: string): unknown {
    return this.st('GET_BARRIER').get(startId);
  }
}
