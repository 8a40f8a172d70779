import { expect } from 'chai';
import { Pool, escapeIdentifier, type PoolClient } from 'pg';
import { CorruptRecordError, SemanticConflictError, canonicalJson, digestCanonical, RECORD_TAGS, type ToolExecutionStartCommand } from '../../domain';
import { buildScenario, type Scenario } from '../../domain/scenario';
import type { PostgresStartBarrier } from '../../infrastructure/postgres';
import { AUDIT_COLUMNS, BARRIER_COLUMNS, MUTATION_COLUMNS, RECEIPT_COLUMNS, TRACE_COLUMNS } from '../../infrastructure/postgres/sql';
import { createDatabase, openOn, rejects, testPool, type TestDatabase } from '../../testkit/postgresHarness';

// R5.3 on PostgreSQL: the owner (or a superuser with triggers off) damages one cell at a time;
// every read fails closed with CorruptRecordError, never a best guess, and a replayed prepare
// never answers `existing` from damaged rows. Each cell is put back before the next one.

type Row = Record<string, string | null>;

/** A different value of the same type that keeps JSON text parseable (a hex digit flipped). */
const damage = (value: string, bigint: boolean): string => {
  if (bigint) return String(BigInt(value) + 1000n);
  const at = Math.max(value.search(/[0-9a-f](?=[^0-9a-f]*$)/), -1);
  if (at >= 0) return value.slice(0, at) + (value[at] === '0' ? '1' : '0') + value.slice(at + 1);
  return value.slice(0, -1) + (value.endsWith('x') ? 'y' : 'x');
};

const IDENTITY_NAMES = ['startId', 'mutationId', 'runEventId', 'traceId', 'auditEventId', 'auditReceiptId', 'attempt'];

describe('PostgreSQL corruption: reads fail closed (R5.3)', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let a: PostgresStartBarrier;
  let admin: Pool;
  let s: Scenario;
  let command: ToolExecutionStartCommand;

  before(async () => {
    db = await createDatabase();
    a = await openOn(db);
    admin = testPool({ connectionString: db.url, max: 2 });
    s = buildScenario();
    for (const c of s.lifecycle) await a.runs.handle(c);
    command = s.startCommand();
    await a.barriers.prepare(command);
  });
  after(async () => {
    await a?.close();
    await admin?.end();
    await db?.drop();
  });

  /** As a superuser with every trigger (append-only and foreign keys) off, for one transaction. */
  const asReplica = async (body: (c: PoolClient) => Promise<void>): Promise<void> => {
    const c = await admin.connect();
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

  const bigintColumns = async (table: string): Promise<Set<string>> =>
    new Set(
      (await admin.query<{ c: string }>(`SELECT column_name AS c FROM information_schema.columns WHERE table_schema = 'ql3' AND table_name = $1 AND data_type = 'bigint'`, [table])).rows.map(
        (r) => r.c,
      ),
    );

  /** Every read must fail closed; a replayed prepare must fail typed, never answer from damage. */
  const expectFailsClosed = async (what: string): Promise<void> => {
    const byId = await rejects(a.barriers.getByStartId(command.startId));
    expect(byId, `${what}: getByStartId ${byId.message}`).to.be.instanceOf(CorruptRecordError);
    const byAttempt = await rejects(a.barriers.getByStepRunAttempt(s.runId, s.stepRunId, 3));
    expect(byAttempt, `${what}: getByStepRunAttempt ${byAttempt.message}`).to.be.instanceOf(CorruptRecordError);
    const replay = await rejects(a.barriers.prepare(command));
    // a damaged digest in the index reads as a different command bound to that identity (R4.3)
    expect(replay instanceof CorruptRecordError || replay instanceof SemanticConflictError, `${what}: prepare ${replay.message}`).to.equal(true);
  };

  const expectHealthy = async (): Promise<void> => {
    expect((await a.barriers.getByStartId(command.startId))?.record.startId).to.equal(command.startId);
    expect((await a.barriers.prepare(command)).outcome).to.equal('existing');
  };

  const guarded: string[] = [];

  /** Change each listed column of one row, alone, check every read, put it back. */
  const sweep = async (table: string, key: readonly [string, string], columns: readonly string[]): Promise<number> => {
    const bigints = await bigintColumns(table);
    const [keyColumn, keyValue] = key;
    const t = escapeIdentifier(table);
    const original = (await admin.query<Row>(`SELECT * FROM ql3.${t} WHERE ${escapeIdentifier(keyColumn)} = $1`, [keyValue])).rows[0];
    expect(original, `${table} row ${keyValue}`).to.not.equal(undefined);
    let swept = 0;
    for (const column of columns) {
      const from = original![column];
      expect(from, `${table}.${column}`).to.be.a('string');
      const to = damage(from!, bigints.has(column));
      const col = escapeIdentifier(column);
      const where = escapeIdentifier(keyColumn);
      try {
        await asReplica((c) => c.query(`UPDATE ql3.${t} SET ${col} = $1 WHERE ${where} = $2`, [to, column === keyColumn ? from : keyValue]).then(() => undefined));
      } catch (e) {
        // a CHECK constraint (to_status = 'running', to_version = from_version + 1) refuses the
        // damage even with every trigger off: the schema itself guards that cell
        expect((e as { code?: string }).code, `${table}.${column}: ${(e as Error).message}`).to.equal('23514');
        guarded.push(`${table}.${column}`);
        swept++;
        continue;
      }
      try {
        await expectFailsClosed(`${table}.${column}`);
      } finally {
        await asReplica((c) => c.query(`UPDATE ql3.${t} SET ${col} = $1 WHERE ${where} = $2`, [from, column === keyColumn ? to : keyValue]).then(() => undefined));
      }
      swept++;
    }
    await expectHealthy();
    return swept;
  };

  it('R6.4 even the owner cannot change a barrier without first disabling its triggers; then any change is caught', async () => {
    const owner = await admin.connect();
    try {
      await owner.query('SET ROLE ql3_owner');
      const refused = await rejects(owner.query(`UPDATE ql3.tool_execution_start_barriers SET adapter_id = 'adapter.other' WHERE start_id = $1`, [command.startId]));
      expect((refused as { code?: string }).code).to.equal('23000');
      await owner.query('ALTER TABLE ql3.tool_execution_start_barriers DISABLE TRIGGER USER');
      await owner.query(`UPDATE ql3.tool_execution_start_barriers SET adapter_id = 'adapter.other' WHERE start_id = $1`, [command.startId]);
      try {
        await expectFailsClosed('owner changed adapter_id');
      } finally {
        await owner.query(`UPDATE ql3.tool_execution_start_barriers SET adapter_id = $2 WHERE start_id = $1`, [command.startId, command.contracts.adapter.id]);
        await owner.query('ALTER TABLE ql3.tool_execution_start_barriers ENABLE TRIGGER USER');
        await owner.query('RESET ROLE');
      }
    } finally {
      owner.release();
    }
    await expectHealthy();
  });

  it('R5.3 every cell of the barrier row and of each fact row, changed alone, is detected', async () => {
    const swept =
      (await sweep('tool_execution_start_barriers', ['start_id', command.startId], BARRIER_COLUMNS)) +
      (await sweep('security_audit_events', ['audit_event_id', command.evidence.auditEventId], AUDIT_COLUMNS)) +
      (await sweep('trace_anchors', ['trace_id', command.evidence.traceId], TRACE_COLUMNS)) +
      (await sweep('audit_receipts', ['audit_receipt_id', command.evidence.auditReceiptId], RECEIPT_COLUMNS)) +
      (await sweep('step_run_mutations', ['mutation_id', command.mutation.mutationId], MUTATION_COLUMNS));
    expect(swept).to.equal(BARRIER_COLUMNS.length + AUDIT_COLUMNS.length + TRACE_COLUMNS.length + RECEIPT_COLUMNS.length + MUTATION_COLUMNS.length);
    expect(guarded).to.deep.equal(['step_run_mutations.to_status', 'step_run_mutations.from_version', 'step_run_mutations.to_version']);
  });

  it('R5.3 every cell of the five event rows of the start, changed alone, is detected', async () => {
    const ids = (await admin.query<{ event_id: string }>(`SELECT event_id FROM ql3.events WHERE stream_id = $1 AND stream_position BETWEEN 4 AND 8 ORDER BY stream_position`, [`run-${s.runId}`])).rows.map(
      (r) => r.event_id,
    );
    expect(ids).to.have.length(5);
    for (const id of ids) await sweep('events', ['event_id', id], ['stream_id', 'stream_position', 'event_id', 'event_type', 'data_json', 'committed_at_ms']);
  });

  it('R5.3 every cell of the seven replay-identity rows, changed alone, is detected', async () => {
    for (const identity of IDENTITY_NAMES) {
      const row = (await admin.query<Row>(`SELECT ctid::text AS row_id, * FROM ql3.start_replay_identities WHERE start_id = $1 AND identity = $2`, [command.startId, identity])).rows[0]!;
      for (const column of ['identity', 'value', 'start_id', 'command_digest']) {
        const from = row[column]!;
        // identity has a CHECK constraint (enforced even with triggers off): move to another name
        const to = column === 'identity' ? IDENTITY_NAMES[(IDENTITY_NAMES.indexOf(from) + 1) % IDENTITY_NAMES.length]! : damage(from, false);
        const update = `UPDATE ql3.start_replay_identities SET ${escapeIdentifier(column)} = $1 WHERE start_id = $2 AND identity = $3 AND value = $4`;
        await asReplica((c) =>
          c.query(update, [to, column === 'start_id' ? from : row.start_id, column === 'identity' ? from : identity, column === 'value' ? from : row.value]).then(() => undefined),
        );
        try {
          await expectFailsClosed(`identity ${identity}.${column}`);
        } finally {
          await asReplica((c) =>
            c
              .query(update, [from, column === 'start_id' ? to : row.start_id, column === 'identity' ? to : identity, column === 'value' ? to : row.value])
              .then(() => undefined),
          );
        }
      }
    }
    await expectHealthy();
  });

  it('R5.3 a consistent forgery (barrier JSON rewritten, re-canonicalised, re-digested, mirrors updated) still fails against its facts', async () => {
    const row = (await admin.query<{ barrier_json: string; barrier_digest: string }>(`SELECT barrier_json, barrier_digest FROM ql3.tool_execution_start_barriers WHERE start_id = $1`, [command.startId])).rows[0]!;
    const forged = JSON.parse(row.barrier_json) as { contracts: { adapter: { id: string } } };
    forged.contracts.adapter.id = 'adapter.http.v9';
    const json = canonicalJson(forged);
    await asReplica((c) =>
      c
        .query(`UPDATE ql3.tool_execution_start_barriers SET barrier_json = $1, barrier_digest = $2, adapter_id = $3 WHERE start_id = $4`, [
          json,
          digestCanonical(RECORD_TAGS.barrier, json),
          'adapter.http.v9',
          command.startId,
        ])
        .then(() => undefined),
    );
    try {
      await expectFailsClosed('forged barrier');
    } finally {
      await asReplica((c) =>
        c
          .query(`UPDATE ql3.tool_execution_start_barriers SET barrier_json = $1, barrier_digest = $2, adapter_id = $3 WHERE start_id = $4`, [
            row.barrier_json,
            row.barrier_digest,
            command.contracts.adapter.id,
            command.startId,
          ])
          .then(() => undefined),
      );
    }
    await expectHealthy();
  });

  it('R5.3 an identity that matches several rows (unique index dropped by the owner, row duplicated) fails closed', async () => {
    const owner = await admin.connect();
    try {
      await owner.query('SET ROLE ql3_owner');
      await owner.query('DROP INDEX ql3.start_replay_identities_key');
      try {
        for (const identity of ['startId', 'attempt', 'traceId']) {
          // an exact duplicate, then a stray naming another start
          for (const startId of [command.startId, 'some-other-start']) {
            await asReplica((c) =>
              c
                .query(
                  `INSERT INTO ql3.start_replay_identities (identity, value, start_id, command_digest)
                   SELECT identity, value, $3, command_digest FROM ql3.start_replay_identities WHERE start_id = $1 AND identity = $2`,
                  [command.startId, identity, startId],
                )
                .then(() => undefined),
            );
            try {
              const read = await rejects(a.barriers.getByStartId(command.startId));
              expect(read, `${identity} -> ${startId}: ${read.message}`).to.be.instanceOf(CorruptRecordError);
              const replay = await rejects(a.barriers.prepare(command));
              expect(replay, `${identity} -> ${startId}: ${replay.message}`).to.be.instanceOf(CorruptRecordError);
              if (identity === 'attempt') {
                const attempt = await rejects(a.barriers.getByStepRunAttempt(s.runId, s.stepRunId, 3));
                expect(attempt, attempt.message).to.be.instanceOf(CorruptRecordError);
                expect(attempt.message).to.match(/bound to 2 barriers/);
              }
            } finally {
              await asReplica((c) =>
                c
                  .query(
                    `DELETE FROM ql3.start_replay_identities WHERE ctid = (SELECT max(ctid) FROM ql3.start_replay_identities WHERE identity = $1 AND start_id = $2)`,
                    [identity, startId],
                  )
                  .then(() => undefined),
              );
            }
          }
        }
      } finally {
        await owner.query('CREATE UNIQUE INDEX start_replay_identities_key ON ql3.start_replay_identities (identity, value)');
        await owner.query('RESET ROLE');
      }
    } finally {
      owner.release();
    }
    await expectHealthy();
  });

  it('R5.3 a missing barrier row under a live replay index, or an attempt the index and the barrier table disagree on, fails closed', async () => {
    const barrier = (await admin.query<Row>(`SELECT * FROM ql3.tool_execution_start_barriers WHERE start_id = $1`, [command.startId])).rows[0]!;
    await asReplica((c) => c.query(`DELETE FROM ql3.tool_execution_start_barriers WHERE start_id = $1`, [command.startId]).then(() => undefined));
    try {
      expect(await rejects(a.barriers.getByStartId(command.startId))).to.be.instanceOf(CorruptRecordError);
      const attempt = await rejects(a.barriers.getByStepRunAttempt(s.runId, s.stepRunId, 3));
      expect(attempt.message).to.match(/the barrier table names \(none\)/);
    } finally {
      const columns = Object.keys(barrier);
      await asReplica((c) =>
        c
          .query(
            `INSERT INTO ql3.tool_execution_start_barriers (${columns.map(escapeIdentifier).join(', ')}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')})`,
            columns.map((k) => barrier[k]),
          )
          .then(() => undefined),
      );
    }
    await expectHealthy();
  });

  it('R5.3 a damaged StepRun or Run head fails the next start closed, writing nothing; a damaged event fails readStream', async () => {
    const next = buildScenario();
    for (const c of next.lifecycle) await a.runs.handle(c);
    const start = next.startCommand();
    const count = async () => Number((await admin.query<{ n: string }>('SELECT count(*) AS n FROM ql3.events')).rows[0]!.n);
    const cases: [string, string, unknown[], string, unknown[]][] = [
      ['step_runs.status', `UPDATE ql3.step_runs SET status = 'running' WHERE run_id = $1`, [next.runId], `UPDATE ql3.step_runs SET status = 'ready' WHERE run_id = $1`, [next.runId]],
      ['step_runs.state_json', `UPDATE ql3.step_runs SET state_json = replace(state_json, '"ready"', '"running"') WHERE run_id = $1`, [next.runId], `UPDATE ql3.step_runs SET state_json = replace(state_json, '"running"', '"ready"') WHERE run_id = $1`, [next.runId]],
      ['runs.version', `UPDATE ql3.runs SET version = version + 1 WHERE run_id = $1`, [next.runId], `UPDATE ql3.runs SET version = version - 1 WHERE run_id = $1`, [next.runId]],
      ['runs.project_id', `UPDATE ql3.runs SET project_id = 'other-project' WHERE run_id = $1`, [next.runId], `UPDATE ql3.runs SET project_id = $2 WHERE run_id = $1`, [next.runId, next.projectId]],
    ];
    for (const [what, breakSql, breakParams, fixSql, fixParams] of cases) {
      await asReplica((c) => c.query(breakSql, breakParams).then(() => undefined));
      try {
        const before = await count();
        const e = await rejects(a.barriers.prepare(start));
        // a moved project is caught by the decider as a precondition; every other damage as corruption
        if (what === 'runs.project_id') expect(e.message, what).to.match(/project_mismatch/);
        else expect(e, `${what}: ${e.message}`).to.be.instanceOf(CorruptRecordError);
        expect(await count(), what).to.equal(before);
      } finally {
        await asReplica((c) => c.query(fixSql, fixParams).then(() => undefined));
      }
    }
    await asReplica((c) => c.query(`UPDATE ql3.events SET data_json = data_json || ' ' WHERE stream_id = $1 AND stream_position = 1`, [`run-${next.runId}`]).then(() => undefined));
    expect(await rejects(a.runs.readStream(next.runId))).to.be.instanceOf(CorruptRecordError);
    await asReplica((c) => c.query(`UPDATE ql3.events SET data_json = rtrim(data_json) WHERE stream_id = $1 AND stream_position = 1`, [`run-${next.runId}`]).then(() => undefined));
    expect((await a.barriers.prepare(start)).outcome).to.equal('created');
  });
});
