import type { Pool, PoolClient } from 'pg';
import { streamNameOf } from '../../domain';
import type { Scenario } from '../../domain/scenario';
import { runRowOf, stepRunRowOf } from '../../projections/rows';
import type { LongRun } from '../lib/longRun';
import { eventRowsOf, lifecycleOf, type EventRowIn, type SeededRun, type StartWrite } from '../lib/startRows';

// Hand-written SQL over schema ql3 for seeding and for the bare baseline. Table and column
// names are constants of this file; every value is a bound parameter (arrays through unnest).

type Row = Readonly<Record<string, unknown>>;

const typeOf = (v: unknown): string => (typeof v === 'number' ? 'bigint' : 'text');

/** `INSERT INTO ql3.t (a, b) SELECT * FROM unnest($1::text[], $2::bigint[])` for rows shaped like `sample`. */
const insertMany = (table: string, sample: Row, offset = 0): { text: string; columns: string[] } => {
  const columns = Object.keys(sample);
  const args = columns.map((c, i) => `$${offset + i + 1}::${typeOf(sample[c])}[]`);
  return { text: `INSERT INTO ql3.${table} (${columns.join(', ')}) SELECT * FROM unnest(${args.join(', ')})`, columns };
};

const columnsOf = (rows: readonly Row[], columns: readonly string[]): unknown[][] => columns.map((c) => rows.map((r) => r[c]));

export const insertRows = async (client: Pool | PoolClient, table: string, rows: readonly Row[]): Promise<void> => {
  if (rows.length === 0) return;
  const { text, columns } = insertMany(table, rows[0]!);
  await client.query(text, columnsOf(rows, columns));
};

/**
 * Seeding and the bare baseline write rows as they stand, heads included, so the event trigger
 * that derives heads and checks the history (R9.1) is off for their transactions (superuser:
 * `session_replication_role = replica`); the rows carry correct chain links, so what the
 * product appends afterwards chains on.
 */
const inTransaction = async (pool: Pool, body: (c: PoolClient) => Promise<void>): Promise<void> => {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    await c.query('SET LOCAL session_replication_role = replica');
    await body(c);
    await c.query('COMMIT');
  } catch (e) {
    await c.query('ROLLBACK');
    throw e;
  } finally {
    c.release();
  }
};

/**
 * The start tables as they were before each fact was stored once (JSON copies and repeated
 * unique keys): the fixed schema of the bare baseline `before-stored-once`, so the gain shows.
 */
export const PG_ADD_JSON_COPIES = `
  ALTER TABLE ql3.security_audit_events ADD COLUMN event_json text;
  ALTER TABLE ql3.trace_anchors ADD COLUMN anchor_json text;
  ALTER TABLE ql3.audit_receipts ADD COLUMN receipt_json text;
  ALTER TABLE ql3.step_run_mutations ADD COLUMN mutation_json text;
  ALTER TABLE ql3.tool_execution_start_barriers ADD COLUMN barrier_json text;
`;
export const PG_RESTORE_REPEATED_KEYS = `
  ALTER TABLE ql3.security_audit_events ALTER COLUMN event_json SET NOT NULL;
  ALTER TABLE ql3.trace_anchors ALTER COLUMN anchor_json SET NOT NULL;
  ALTER TABLE ql3.audit_receipts ALTER COLUMN receipt_json SET NOT NULL,
    ADD CONSTRAINT audit_receipts_audit_event_id_key UNIQUE (audit_event_id), ADD CONSTRAINT audit_receipts_trace_id_key UNIQUE (trace_id);
  ALTER TABLE ql3.step_run_mutations ALTER COLUMN mutation_json SET NOT NULL, ADD CONSTRAINT step_run_mutations_run_event_id_key UNIQUE (run_event_id);
  ALTER TABLE ql3.tool_execution_start_barriers ALTER COLUMN barrier_json SET NOT NULL,
    ADD CONSTRAINT tool_execution_start_barriers_mutation_id_key UNIQUE (mutation_id),
    ADD CONSTRAINT tool_execution_start_barriers_run_event_id_key UNIQUE (run_event_id),
    ADD CONSTRAINT tool_execution_start_barriers_trace_id_key UNIQUE (trace_id),
    ADD CONSTRAINT tool_execution_start_barriers_audit_event_id_key UNIQUE (audit_event_id),
    ADD CONSTRAINT tool_execution_start_barriers_audit_receipt_id_key UNIQUE (audit_receipt_id);
`;


/**
 * The replay index the ADR's schema kept beside the facts (seven rows per start, each repeating
 * the command digest, a unique index and one on start_id), for the bare baseline on the schema
 * before each fact was stored once: run after PG_ADD_JSON_COPIES and PG_RESTORE_REPEATED_KEYS on
 * a fresh database. Today each identity is its fact's own key, with no table of its own.
 */
export const PG_INDEX_BEFORE_COMPACT = `
  CREATE TABLE ql3.start_replay_identities (identity TEXT NOT NULL, value TEXT NOT NULL, start_id TEXT NOT NULL REFERENCES ql3.tool_execution_start_barriers (start_id), command_digest TEXT NOT NULL);
  CREATE UNIQUE INDEX start_replay_identities_key ON ql3.start_replay_identities (identity, value);
  CREATE INDEX start_replay_identities_start ON ql3.start_replay_identities (start_id);`;

/** Ready Runs (the lifecycle of `buildScenario`), 1,000 per statement group. */
export const seedReadyRuns = async (pool: Pool, scenarios: readonly Scenario[], committedAtMs = Date.now()): Promise<void> => {
  for (let i = 0; i < scenarios.length; i += 1000) {
    const streams: Row[] = [];
    const runs: Row[] = [];
    const stepRuns: Row[] = [];
    const events: EventRowIn[] = [];
    for (const sc of scenarios.slice(i, i + 1000)) {
      const { events: es, state } = lifecycleOf(sc);
      const run = state.run!;
      streams.push({ stream_id: streamNameOf(run.runId), stream_type: 'run', version: run.version });
      runs.push({ ...runRowOf(run) });
      for (const s of Object.values(state.stepRuns)) stepRuns.push({ ...stepRunRowOf(s) });
      events.push(...eventRowsOf(run.runId, 0, es, committedAtMs));
    }
    await inTransaction(pool, async (c) => {
      await insertRows(c, 'streams', streams);
      await insertRows(c, 'runs', runs);
      await insertRows(c, 'step_runs', stepRuns);
      await insertRows(c, 'events', events as unknown as Row[]);
    });
  }
};

export const seedLongRun = async (pool: Pool, long: LongRun, committedAtMs = Date.now()): Promise<void> => {
  const run = long.state.run!;
  await inTransaction(pool, async (c) => {
    await insertRows(c, 'streams', [{ stream_id: streamNameOf(run.runId), stream_type: 'run', version: run.version }]);
    await insertRows(c, 'runs', [{ ...runRowOf(run) }]);
    await insertRows(c, 'step_runs', Object.values(long.state.stepRuns).map((s) => ({ ...stepRunRowOf(s) })));
    const events = eventRowsOf(run.runId, 0, long.events, committedAtMs) as unknown as Row[];
    for (let i = 0; i < events.length; i += 5000) await insertRows(c, 'events', events.slice(i, i + 5000));
  });
};

/**
 * The bare baseline: `BEGIN`, one statement inserting every row a start inserts (five events,
 * the evidence, the mutation, the barrier; seven index rows on the schema before) and moving the StepRun, stream and
 * Run heads, `COMMIT`. No lookup, no lock, no compare-and-set, READ COMMITTED.
 */
export class BareStart {
  private text: string | undefined;
  private order: ((w: StartWrite) => unknown[])[] = [];
  /** `before-stored-once`: the rows with their JSON copies and the replay index, for the tables as they were before each fact was stored once. */
  constructor(private readonly schema: 'current' | 'before-stored-once' = 'current') {}
  private rowOf(w: StartWrite, key: 'audit' | 'trace' | 'receipt' | 'mutation' | 'barrier'): Row {
    if (this.schema === 'current') return w.rows[key] as unknown as Row;
    const column = { audit: 'event_json', trace: 'anchor_json', receipt: 'receipt_json', mutation: 'mutation_json', barrier: 'barrier_json' }[key];
    return { ...(w.rows[key] as unknown as Row), [column]: w.rows.json[key] };
  }

  /** The replay index rows of the schema before (each repeating the command digest); today none: each identity is its fact's key. */
  private identityRows(w: StartWrite): Row[] {
    return (this.schema === 'current' ? [] : w.rows.identities) as unknown as Row[];
  }

  private compile(w: StartWrite): string {
    const parts: string[] = [];
    let n = 0;
    const add = (name: string, table: string, rows: readonly Row[]) => {
      const { text, columns } = insertMany(table, rows[0]!, n);
      n += columns.length;
      parts.push(`${name} AS (${text})`);
      return columns;
    };
    const eventCols = add('e', 'events', w.events as unknown as Row[]);
    const single = (key: 'audit' | 'trace' | 'receipt' | 'mutation' | 'barrier', table: string) => {
      const cols = add(key, table, [this.rowOf(w, key)]);
      this.order.push((x) => columnsOf([this.rowOf(x, key)], cols));
    };
    this.order.push((x) => columnsOf(x.events as unknown as Row[], eventCols));
    single('audit', 'security_audit_events');
    single('trace', 'trace_anchors');
    single('receipt', 'audit_receipts');
    single('mutation', 'step_run_mutations');
    single('barrier', 'tool_execution_start_barriers');
    if (this.schema !== 'current') {
      const idCols = add('i', 'start_replay_identities', this.identityRows(w));
      this.order.push((x) => columnsOf(this.identityRows(x), idCols));
    }
    parts.push(
      `s AS (UPDATE ql3.step_runs SET status = $${n + 1}, version = $${n + 2}, digest = $${n + 3}, state_json = $${n + 4} WHERE run_id = $${n + 5} AND step_run_id = $${n + 6})`,
      `h AS (UPDATE ql3.streams SET version = $${n + 7} WHERE stream_id = $${n + 8})`,
    );
    this.order.push((x) => [x.stepRunAfter.status, x.stepRunAfter.version, x.stepRunAfter.digest, x.stepRunAfter.state_json, x.stepRunAfter.run_id, x.stepRunAfter.step_run_id]);
    this.order.push((x) => [x.runVersionAfter, streamNameOf(x.rows.barrier.run_id)]);
    this.order.push((x) => [x.runVersionAfter, x.rows.barrier.run_id]);
    return `WITH ${parts.join(',\n')} UPDATE ql3.runs SET version = $${n + 9} WHERE run_id = $${n + 10}`;
  }

  async run(pool: Pool, w: StartWrite): Promise<void> {
    this.text ??= this.compile(w);
    const params = this.order.flatMap((f) => f(w));
    // Prepared by name, as the product's start statements are: parse and plan once.
    await inTransaction(pool, async (c) => {
      await c.query({ name: `bench_bare_start_${this.schema}`, text: this.text!, values: params });
    });
  }
}

export const CREATE_FLOOR = 'CREATE TABLE IF NOT EXISTS public.bench_commit_floor (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v TEXT NOT NULL)';

/** The commit floor: `BEGIN; INSERT; COMMIT`, three round trips. */
export const floorTransaction = async (pool: Pool, i: number): Promise<void> => {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    await c.query({ name: 'bench_floor', text: 'INSERT INTO public.bench_commit_floor (v) VALUES ($1)', values: [String(i)] });
    await c.query('COMMIT');
  } finally {
    c.release();
  }
};

/** One indexed SELECT round trip: the stored barrier by primary key, prepared by name. */
export const selectBarrier = (pool: Pool, startId: string): Promise<unknown> =>
  pool.query({ name: 'bench_select_barrier', text: 'SELECT * FROM ql3.tool_execution_start_barriers WHERE start_id = $1', values: [startId] });

/** Started Runs as the product writes them (lifecycle, five facts, barrier, identities): history. */
export const seedStartedRuns = async (pool: Pool, runs: readonly SeededRun[]): Promise<void> => {
  for (let i = 0; i < runs.length; i += 1000) {
    const batch = runs.slice(i, i + 1000);
    await inTransaction(pool, async (c) => {
      await insertRows(c, 'streams', batch.map((r) => r.stream));
      await insertRows(c, 'runs', batch.map((r) => ({ ...r.run })));
      await insertRows(c, 'step_runs', batch.map((r) => ({ ...r.stepRun })));
      await insertRows(c, 'events', batch.flatMap((r) => r.events) as unknown as Row[]);
      await insertRows(c, 'security_audit_events', batch.map((r) => ({ ...r.start.rows.audit })));
      await insertRows(c, 'trace_anchors', batch.map((r) => ({ ...r.start.rows.trace })));
      await insertRows(c, 'audit_receipts', batch.map((r) => ({ ...r.start.rows.receipt })));
      await insertRows(c, 'step_run_mutations', batch.map((r) => ({ ...r.start.rows.mutation })));
      await insertRows(c, 'tool_execution_start_barriers', batch.map((r) => ({ ...r.start.rows.barrier })));
      // the in-doubt index as its trigger writes it: every seeded start is in doubt
      await insertRows(c, 'in_doubt_starts', batch.map(({ start: { rows: { barrier: b } } }) => ({ start_id: b.start_id, project_id: b.project_id, run_id: b.run_id, committed_at_ms: b.committed_at_ms })));
    });
  }
};
