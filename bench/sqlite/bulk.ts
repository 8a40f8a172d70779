import type Database from 'better-sqlite3';
import { streamNameOf } from '../../domain';
import type { Scenario } from '../../domain/scenario';
import { runRowOf, stepRunRowOf } from '../../projections/rows';
import { eventRowsOf, lifecycleOf, type EventRowIn, type SeededRun, type StartWrite } from '../lib/startRows';
import type { LongRun } from '../lib/longRun';
import * as SQL from './sql';

// Bulk writers over a raw better-sqlite3 connection to a database the authority migrated.
// Seeding writes exactly the rows the product would have written (derived by the domain), in
// large transactions, so setup stays far cheaper than what is measured.

export class SqliteWriter {
  private readonly s: Record<keyof typeof SQL, Database.Statement | undefined>;
  constructor(readonly db: Database.Database) {
    db.exec(SQL.CREATE_FLOOR);
    const entries = Object.entries(SQL).filter(([k]) => k !== 'CREATE_FLOOR').map(([k, sql]) => [k, db.prepare(sql)]);
    this.s = Object.fromEntries(entries) as Record<keyof typeof SQL, Database.Statement>;
  }

  private st(name: keyof typeof SQL): Database.Statement {
    return this.s[name]!;
  }

  inTransaction(body: () => void): void {
    this.db.exec('BEGIN IMMEDIATE');
    try {
      body();
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

  /** Started Runs: lifecycle, the five facts, the barrier and its identities (scale seeding). */
  seededRuns(runs: readonly SeededRun[]): void {
    for (const r of runs) {
      this.st('INSERT_STREAM').run(r.stream);
      this.st('INSERT_RUN').run(r.run);
      this.st('INSERT_STEP_RUN').run(r.stepRun);
      this.events(r.events);
      this.startRows(r.start);
    }
  }

  private startRows(w: StartWrite): void {
    this.st('INSERT_AUDIT').run(w.rows.audit);
    this.st('INSERT_TRACE').run(w.rows.trace);
    this.st('INSERT_RECEIPT').run(w.rows.receipt);
    this.st('INSERT_MUTATION').run(w.rows.mutation);
    this.st('INSERT_BARRIER').run(w.rows.barrier);
    for (const i of w.rows.identities) this.st('INSERT_IDENTITY').run(i);
  }

  /** The bare baseline: one transaction inserting the same rows as a start, no reads, no checks. */
  bareStart(w: StartWrite): void {
    this.db.exec('BEGIN IMMEDIATE');
    try {
      this.events(w.events);
      const runId = w.rows.barrier.run_id;
      this.st('UPDATE_STEP_RUN').run(w.stepRunAfter);
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
