import { expect } from 'chai';
import { CorruptRecordError, type LifecycleCommand } from '../../domain';
import { rejects } from '../../testkit/rejects';
import { openPostgresStartBarrier, type RecoverablePostgresStartBarrier } from '../../infrastructure/postgres/postgresAuthority';
import { MigratedTemplate, type TestDatabase } from '../../testkit/postgresHarness';
import type { SqliteStartBarrier } from '../../infrastructure/sqlite';
import type { StartOutcomeRow } from '../../projections/outcomeRows';
import type { EventRow } from '../../domain/eventRows';

// Raw rows for the rebuild comparisons: the event log in global order and the stored outcomes.

export const rawSqlite = async (a: SqliteStartBarrier) => ({
  events: a.db.prepare('SELECT stream_id, stream_position, event_id, event_type, data_json, committed_at_ms FROM events ORDER BY global_position').all() as EventRow[],
  outcomes: a.db.prepare('SELECT * FROM start_outcomes ORDER BY start_id').all() as StartOutcomeRow[],
});

export const rawPostgres = async (a: RecoverablePostgresStartBarrier) => ({
  events: (await a.pool.query('SELECT stream_id, stream_position, event_id, event_type, data_json, committed_at_ms FROM ql3.events ORDER BY global_position')).rows as EventRow[],
  outcomes: (await a.pool.query('SELECT * FROM ql3.start_outcomes ORDER BY start_id')).rows as StartOutcomeRow[],
});

/** The outcome a driver would append for a StepRun's running start. */
export const completion = (s: { runId: string; stepRunId: string }): LifecycleCommand => ({
  type: 'CompleteStepRun',
  data: { runId: s.runId, stepRunId: s.stepRunId, decidedBy: 'spec', reason: 'tool_succeeded', requestedAtMs: 2 },
});

/** A read or write on a damaged store: CORRUPT_RECORD, never a value or a raw driver error (R9.3). */
export const expectCorrupt = async (what: string, p: Promise<unknown>): Promise<void> => {
  const e = await rejects(p);
  expect(e instanceof CorruptRecordError, `${what}: ${e.constructor.name} ${e.message}`).to.equal(true);
};

/** For each spec of the block: a database cloned from a migrated template and an authority on it (no plan store); closed and dropped after it. */
export const eachFreshPostgres = (): { db: TestDatabase; a: RecoverablePostgresStartBarrier } => {
  const template = new MigratedTemplate();
  const on = {} as ReturnType<typeof eachFreshPostgres>;
  after(() => template.dropAll());
  beforeEach(async () => {
    on.db = await template.clone();
    on.a = await openPostgresStartBarrier({ connectionString: on.db.url });
  });
  afterEach(async () => {
    await on.a.close();
    await on.db.drop();
  });
  return on;
};
