import { expect } from 'chai';
import { Pool, type PoolClient } from 'pg';
import { buildScenario, type Scenario } from '../../domain/scenario';
import type { StartStepHook } from '../../application/authority';
import type { EvidenceKeyringOptions } from '../../application/evidenceKeys';
import { openPostgresStartBarrier, type PostgresStartBarrier, type PostgresWriteMode } from '../../infrastructure/postgres';
import { countOf, countRows, createDatabase, testPool, type TestDatabase } from '../../testkit/postgresHarness';

// The start transaction on the real server (R3, R3.10, R5.2): what it writes, the clock it
// stamps, and what it costs in statements (round trips), measured by counting every query the
// pool's connections send.

describe('PostgreSQL start transaction (R3, R5.2)', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let admin: Pool;
  const opened: PostgresStartBarrier[] = [];
  const pools: Pool[] = [];

  before(async () => {
    db = await createDatabase();
    admin = testPool({ connectionString: db.url, max: 2 });
  });
  after(async () => {
    for (const a of opened.splice(0)) await a.close();
    for (const p of pools.splice(0)) await p.end();
    await admin?.end();
    await db?.drop();
  });

  /** An authority on its own pool whose connections count the statements they send. */
  const open = async (writeMode: PostgresWriteMode = 'batched', hook?: StartStepHook, evidenceKeys?: EvidenceKeyringOptions) => {
    const statements: string[] = [];
    const pool = testPool({ connectionString: db.url, max: 4 });
    pools.push(pool);
    pool.on('connect', (client: PoolClient) => {
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        const first = args[0];
        statements.push(typeof first === 'string' ? first : String((first as { text?: string }).text));
        return query(...args);
      };
    });
    const a = await openPostgresStartBarrier({ pool, writeMode, ...(hook ? { hooks: { onStartStep: hook } } : {}), ...(evidenceKeys ? { evidenceKeys } : {}) });
    opened.push(a);
    return { a, statements };
  };

  const setUp = async (a: PostgresStartBarrier, options: Parameters<typeof buildScenario>[0] = {}): Promise<Scenario> => {
    const s = buildScenario(options);
    for (const c of s.lifecycle) await a.runs.handle(c);
    return s;
  };

  const dbNowMs = async (): Promise<number> =>
    Number((await admin.query<{ now: string }>('SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now')).rows[0]!.now);

  it('R3.3-R3.7 one start writes exactly one row per fact, seven identities and five events; the StepRun is running', async () => {
    const { a } = await open();
    const s = await setUp(a);
    const before = await countRows(admin);
    const result = await a.barriers.prepare(s.startCommand());
    expect(result.outcome).to.equal('created');
    const after = await countRows(admin);
    const delta = Object.fromEntries(Object.keys(after).map((t) => [t, countOf(after, t) - countOf(before, t)]).filter(([, d]) => d !== 0));
    expect(delta).to.deep.equal({
      events: 5,
      security_audit_events: 1,
      trace_anchors: 1,
      audit_receipts: 1,
      step_run_mutations: 1,
      tool_execution_start_barriers: 1, // its seven identities are the keys of these rows: no index rows of their own
      in_doubt_starts: 1, // the read model the database keeps beside the barrier until an outcome
    });
    const step = await admin.query('SELECT status, version FROM ql3.step_runs WHERE run_id = $1 AND step_run_id = $2', [s.runId, s.stepRunId]);
    expect(step.rows).to.deep.equal([{ status: 'running', version: '3' }]);
    const heads = await admin.query(`SELECT (SELECT version FROM ql3.runs WHERE run_id = $1) AS run, (SELECT version FROM ql3.streams WHERE stream_id = $2) AS stream`, [
      s.runId,
      `run-${s.runId}`,
    ]);
    expect(heads.rows[0]).to.deep.equal({ run: '8', stream: '8' });
  });

  it('R4.2 an exact replay returns existing, equal to the created barrier, and writes nothing', async () => {
    const { a } = await open();
    const s = await setUp(a);
    const command = s.startCommand();
    const created = await a.barriers.prepare(command);
    const before = await countRows(admin);
    const replay = await a.barriers.prepare(structuredClone(command));
    expect(replay).to.deep.equal({ outcome: 'existing', barrier: created.barrier });
    expect(await countRows(admin)).to.deep.equal(before);
    expect(await a.barriers.getByStartId(command.startId)).to.deep.equal(created.barrier);
    expect(await a.barriers.getByStepRunAttempt(s.runId, s.stepRunId, 3)).to.deep.equal(created.barrier);
  });

  it('R3.10 committed_at_ms is transaction_timestamp(): one value on every fact and event of a start, whatever requestedAtMs says', async () => {
    // stepwise, with a pause after each step: clock_timestamp() or now() per row would differ.
    const pause: StartStepHook = (step) => (step === 'lookup' ? undefined : new Promise((r) => setTimeout(r, 30)));
    const { a } = await open('stepwise', pause);
    for (const requestedAtMs of [0, 1_000, 8_000_000_000_000]) {
      const s = await setUp(a, { requestedAtMs });
      const t0 = await dbNowMs();
      const result = await a.barriers.prepare(s.startCommand());
      const t1 = await dbNowMs();
      const committed = result.barrier.committedAtMs;
      expect(committed).to.be.within(t0, t1);
      expect(committed).to.not.equal(requestedAtMs);
      expect(result.barrier.record.requestedAtMs).to.equal(requestedAtMs);
      // every fact table and every event row of this start carries the one value
      const { rows } = await admin.query<{ source: string; committed_at_ms: string }>(
        `SELECT 'barrier' AS source, committed_at_ms FROM ql3.tool_execution_start_barriers WHERE start_id = $1
         UNION ALL SELECT 'audit', committed_at_ms FROM ql3.security_audit_events WHERE start_id = $1
         UNION ALL SELECT 'trace', committed_at_ms FROM ql3.trace_anchors WHERE start_id = $1
         UNION ALL SELECT 'receipt', committed_at_ms FROM ql3.audit_receipts WHERE start_id = $1
         UNION ALL SELECT 'mutation', committed_at_ms FROM ql3.step_run_mutations WHERE start_id = $1
         UNION ALL SELECT 'event ' || stream_position, committed_at_ms FROM ql3.events WHERE stream_id = $2 AND stream_position > 3`,
        [result.barrier.record.startId, `run-${s.runId}`],
      );
      expect(rows).to.have.length(10);
      for (const r of rows) expect(Number(r.committed_at_ms), r.source).to.equal(committed);
      const mutation = await admin.query('SELECT requested_at_ms FROM ql3.step_run_mutations WHERE start_id = $1', [result.barrier.record.startId]);
      expect(Number(mutation.rows[0].requested_at_ms)).to.equal(requestedAtMs);
    }
  });

  it('R5.2 the transaction is SERIALIZABLE with the configured timeouts set LOCAL, not leaked to the pooled session', async () => {
    const { a, statements } = await open('batched');
    const s = await setUp(a);
    statements.length = 0;
    await a.barriers.prepare(s.startCommand());
    // round trip 1 is the unlocked read (the replay lookup among it: no predicate lock shared
    // with other Runs); round trip 2 is one simple query, one implicit SERIALIZABLE transaction:
    // the timeouts SET LOCAL (inlined), the Run's turn and expected version (R9.5: the Run row
    // lock, no advisory key; a first attempt, so not alone), the write, each statement
    // prepared once per connection
    expect(statements).to.have.length(2);
    // the replay lookup probes each fact's own unique key
    expect(statements[0]).to.contain('FROM ql3.step_run_mutations f WHERE f.mutation_id =');
    expect(statements[0]).not.to.contain('start_replay_identities');
    expect(statements[1]).to.match(
      /^SET TRANSACTION ISOLATION LEVEL SERIALIZABLE;\nSET LOCAL statement_timeout = '5000';\nSET LOCAL lock_timeout = '2000';\nSET LOCAL idle_in_transaction_session_timeout = '10000';\n(PREPARE ql3w_[0-9a-f]+ AS [^]*?;\n)*EXECUTE ql3w_[0-9a-f]+\('[^']+', '\d+', 'false'\);\nEXECUTE ql3w_[0-9a-f]+\([^]*\)$/,
    );
    expect(statements[1]).to.contain('take_start_turn');
    expect(statements.join('\n')).not.to.contain('pg_advisory');
    // (the race specs prove each timeout fires; here: once committed, the session is clean)
    const client = await a.pool.connect();
    try {
      const { rows } = await client.query(`SELECT current_setting('transaction_isolation') AS iso, current_setting('lock_timeout') AS lock, current_setting('statement_timeout') AS st`);
      expect(rows[0]).to.deep.equal({ iso: 'read committed', lock: '0', st: '0' });
    } finally {
      client.release();
    }
  });

  it('R5.2 round trips per call, counted: batched start 2, keyed or not (read; turn, compare-and-set, write and commit in one query), exact replay 1 (no transaction, no turn: immutable rows), stepwise start 7 (the read just before BEGIN, the head moves the event trigger\'s); R5.2 the Run turn before any evidence', async () => {
    const batched = await open('batched');
    const s = await setUp(batched.a);
    batched.statements.length = 0;
    await batched.a.barriers.prepare(s.startCommand());
    const created = [...batched.statements];
    batched.statements.length = 0;
    await batched.a.barriers.prepare(s.startCommand());
    const replay = [...batched.statements];

    const stepwise = await open('stepwise');
    const s2 = await setUp(stepwise.a);
    stepwise.statements.length = 0;
    await stepwise.a.barriers.prepare(s2.startCommand());
    const steps = [...stepwise.statements];

    const shape = (qs: string[]) =>
      qs.map((q) =>
        q.startsWith('BEGIN ISOLATION LEVEL SERIALIZABLE; SET LOCAL statement_timeout') && q.includes('transaction_timestamp()') && q.includes('take_run_turn') ? 'BEGIN + configure + turn'
          : q.startsWith('SET TRANSACTION ISOLATION LEVEL SERIALIZABLE;') && q.includes('EXECUTE ql3w_') ? 'turn + write + commit'
          : q === 'COMMIT' ? 'COMMIT' : q.startsWith('WITH\n  b AS') ? 'read barrier'
          : q.startsWith('WITH\n  lookup AS') ? 'read' : q.includes('FROM ql3.runs WHERE run_id') ? 'state' : q.startsWith('WITH evidence_events') ? 'write' : q.slice(0, 40),
      );
    expect(shape(created)).to.deep.equal(['read', 'turn + write + commit']);
    expect(shape(replay)).to.deep.equal(['read']);
    // a second start on a warm connection: still two, nothing prepared again
    const s3 = await setUp(batched.a);
    batched.statements.length = 0;
    await batched.a.barriers.prepare(s3.startCommand());
    expect(shape(batched.statements)).to.deep.equal(['read', 'turn + write + commit']);
    // keyed (R9.4): the head's seal comes with the read, the start's seals with the write
    const keyed = await open('batched', undefined, { active: { id: 'k1', secret: Buffer.alloc(32, 7) } });
    const s4 = await setUp(keyed.a); // its lifecycle stores the seal origin
    keyed.statements.length = 0;
    expect((await keyed.a.barriers.prepare(s4.startCommand())).outcome).to.equal('created');
    expect(shape(keyed.statements)).to.deep.equal(['read', 'turn + write + commit']);
    keyed.statements.length = 0;
    expect((await keyed.a.barriers.prepare(s4.startCommand())).outcome).to.equal('existing');
    expect(shape(keyed.statements)).to.deep.equal(['read']);
    expect(shape(steps).slice(0, 2)).to.deep.equal(['read', 'BEGIN + configure + turn']);
    expect(steps).to.have.length(7);
    // the turn (the Run row lock) precedes every statement that writes evidence
    const lockAt = steps.findIndex((q) => q.includes('take_run_turn'));
    const firstWrite = steps.findIndex((q) => q.includes('INSERT INTO'));
    expect(lockAt).to.equal(1);
    expect(firstWrite).to.be.greaterThan(lockAt);
  });

  it('R5.2 both write modes write byte-identical rows for one command (up to the commit clock)', async () => {
    const other = await createDatabase();
    const otherAdmin = testPool({ connectionString: other.url, max: 1 });
    try {
      const rowsOf = async (mode: PostgresWriteMode, target: TestDatabase, pool: Pool) => {
        const a = await openPostgresStartBarrier({ connectionString: target.url, writeMode: mode });
        try {
          const s = await setUp(a, { prefix: 'same-command' });
          const r = await a.barriers.prepare(s.startCommand());
          const out = await pool.query<{ row: string }>(
            `SELECT row_to_json(b)::text AS row FROM ql3.tool_execution_start_barriers b WHERE start_id = $1
             UNION ALL SELECT row_to_json(t)::text FROM ql3.security_audit_events t WHERE start_id = $1
             UNION ALL SELECT row_to_json(t)::text FROM ql3.trace_anchors t WHERE start_id = $1
             UNION ALL SELECT row_to_json(t)::text FROM ql3.audit_receipts t WHERE start_id = $1
             UNION ALL SELECT row_to_json(m)::text FROM ql3.step_run_mutations m WHERE start_id = $1
             UNION ALL SELECT row_to_json(s)::text FROM (SELECT * FROM ql3.step_runs WHERE run_id = $2) s
             UNION ALL SELECT row_to_json(e)::text FROM (SELECT stream_id, stream_position, event_id, event_type, data_json FROM ql3.events
                                                         WHERE stream_id = $3 AND stream_position > 3 ORDER BY stream_position) e`,
            [r.barrier.record.startId, s.runId, `run-${s.runId}`],
          );
          return out.rows.map((x) => x.row.replace(/"committed_at_ms":\d+/g, '"committed_at_ms":0'));
        } finally {
          await a.close();
        }
      };
      const batched = await rowsOf('batched', db, admin);
      const stepwise = await rowsOf('stepwise', other, otherAdmin);
      expect(batched).to.have.length(5 + 1 + 5);
      expect(stepwise).to.deep.equal(batched);
    } finally {
      await otherAdmin.end();
      await other.drop();
    }
  });
});
