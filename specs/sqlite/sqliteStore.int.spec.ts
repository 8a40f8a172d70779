import { expect } from 'chai';
import { copyFileSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { CorruptRecordError, START_FACT_TYPES } from '../../domain';
import { dropAllTriggers, mutateCell } from '../../reliability/lib/damage';
import { checkStore, describeProblems } from '../../reliability/lib/invariants';
import { sqliteRaw } from '../../reliability/lib/rawSql';
import { spawnTsxWorker } from '../../reliability/lib/workerProcess';
import { START_STEPS } from '../../infrastructure/authority';
import { openSqliteStartBarrier, MigrationError, type SqliteStartBarrier } from '../../infrastructure/sqlite';
import { LOOKUP_REPLAY, SELECT_RUN_HEAD, SELECT_STEP_RUN, CAS_STEP_RUN, CAS_STREAM, SELECT_ATTEMPT } from '../../infrastructure/sqlite/sql';
import { rebuildProjections } from '../../projections/rebuild';
import type { EventRow } from '../../projections/verifyRows';
import { setUp } from '../conformance/startBarrierConformance';
import { freshDbPath } from '../support/tmp';
import { openFreshSqlite, sqliteCounts } from './support';

const ROOT = join(__dirname, '..', '..');

describe('SQLite backend (R5.1)', function () {
  this.timeout(120_000);

  describe('R5.1 migrations', () => {
    it('R5.1 applies every migration to an empty file: tables, indexes, triggers, foreign keys, capability v28', async () => {
      const a = await openFreshSqlite();
      try {
        const names = (type: string) =>
          (a.db.prepare('SELECT name FROM sqlite_master WHERE type = ? ORDER BY name').all(type) as { name: string }[]).map((r) => r.name);
        expect(names('table')).to.include.members([
          'streams', 'events', 'runs', 'step_runs', 'security_audit_events', 'trace_anchors', 'audit_receipts',
          'step_run_mutations', 'tool_execution_start_barriers', 'start_replay_identities', 'capabilities', 'schema_migrations',
        ]);
        expect(names('index')).to.include('start_replay_identities_key');
        expect(names('trigger')).to.include.members(['events_no_update', 'events_no_delete', 'tool_execution_start_barriers_no_update', 'tool_execution_start_barriers_no_delete']);
        const fks = (a.db.prepare("SELECT \"table\" AS target, \"from\" AS col FROM pragma_foreign_key_list('tool_execution_start_barriers')").all() as { target: string; col: string }[])
          .map((f) => `${f.col}->${f.target}`)
          .sort();
        expect(fks).to.include.members([
          'audit_event_id->security_audit_events',
          'audit_receipt_id->audit_receipts',
          'mutation_id->step_run_mutations',
          'run_event_id->events',
          'run_id->step_runs',
          'step_run_id->step_runs',
          'trace_id->trace_anchors',
        ]);
        expect(a.db.prepare("SELECT version FROM capabilities WHERE name = 'local-control-core'").get()).to.deep.equal({ version: 28 });
        const applied = (a.db.prepare('SELECT name FROM schema_migrations ORDER BY name').all() as { name: string }[]).map((r) => r.name);
        expect(applied).to.include.members(['0055-tool-execution-start-barriers', '0056-capability-v28']);
        expect(a.db.pragma('foreign_keys', { simple: true })).to.equal(1);
        expect(a.db.pragma('journal_mode', { simple: true })).to.equal('wal');
        expect(a.db.pragma('synchronous', { simple: true })).to.equal(2); // FULL
      } finally {
        await a.close();
      }
    });

    it('R5.1 synchronous=NORMAL only when asked', async () => {
      const a = await openSqliteStartBarrier({ path: freshDbPath(), synchronous: 'NORMAL' });
      expect(a.db.pragma('synchronous', { simple: true })).to.equal(1);
      await a.close();
    });

    it('re-opening is a no-op; an edited applied migration or a newer database is refused', async () => {
      const path = freshDbPath();
      await (await openSqliteStartBarrier({ path })).close();
      await (await openSqliteStartBarrier({ path })).close();
      const raw = new Database(path);
      raw.prepare("UPDATE schema_migrations SET checksum = 'sha256:edited' WHERE name = '0001-event-store'").run();
      raw.close();
      let error: unknown;
      try {
        await openSqliteStartBarrier({ path });
      } catch (e) {
        error = e;
      }
      expect(error).to.be.instanceOf(MigrationError);
      expect((error as Error).message).to.contain('was edited');

      const newer = freshDbPath();
      await (await openSqliteStartBarrier({ path: newer })).close();
      const raw2 = new Database(newer);
      raw2.prepare("INSERT INTO schema_migrations VALUES ('9999-from-the-future', 'sha256:x', 0)").run();
      raw2.close();
      error = undefined;
      try {
        await openSqliteStartBarrier({ path: newer });
      } catch (e) {
        error = e;
      }
      expect(error).to.be.instanceOf(MigrationError);
      expect((error as Error).message).to.contain('newer than the code');
    });
  });

  describe('R6.4 history is never overwritten', () => {
    it('R6.4 triggers abort any UPDATE or DELETE of events, facts, barriers and replay identities', async () => {
      const a = await openFreshSqlite();
      const s = await setUp(a);
      await a.barriers.prepare(s.startCommand());
      for (const [table, column] of [
        ['events', 'event_type'],
        ['security_audit_events', 'start_id'],
        ['trace_anchors', 'start_id'],
        ['audit_receipts', 'start_id'],
        ['step_run_mutations', 'start_id'],
        ['tool_execution_start_barriers', 'barrier_json'],
        ['start_replay_identities', 'command_digest'],
      ] as const) {
        expect(() => a.db.prepare(`UPDATE ${table} SET ${column} = 'x'`).run(), table).to.throw(/append-only|immutable/);
        expect(() => a.db.prepare(`DELETE FROM ${table}`).run(), table).to.throw(/append-only|immutable/);
      }
      await a.close();
    });

    it('R6.4 replay and start lookups use unique indexes, never a scan of the history', async () => {
      const a = await openFreshSqlite();
      const named = { status: 'x', version: 1, digest: 'x', state_json: 'x', run_id: 'x', step_run_id: 'x', expected_version: 1, expected_status: 'x', expected_digest: 'x' };
      for (const sql of [LOOKUP_REPLAY, SELECT_RUN_HEAD, SELECT_STEP_RUN, SELECT_ATTEMPT, CAS_STEP_RUN, CAS_STREAM]) {
        const statement = a.db.prepare(`EXPLAIN QUERY PLAN ${sql}`);
        const args = sql.includes('@') ? [named] : Array.from({ length: (sql.match(/\?/g) ?? []).length }, () => 'x');
        const plan = (statement.all(...args) as { detail: string }[]).map((r) => r.detail);
        for (const step of plan) expect(step, `${sql}\n${plan.join('\n')}`).to.not.match(/^SCAN (events|start_replay_identities|tool_execution_start_barriers|step_runs|runs|streams)\b/);
      }
      await a.close();
    });
  });

  describe('inline projections', () => {
    it('rebuilding every projection from the event log gives the stored rows', async () => {
      const a = await openFreshSqlite();
      for (let i = 0; i < 3; i++) {
        const s = await setUp(a, { withApproval: i === 1 });
        await a.barriers.prepare(s.startCommand());
        if (i === 2) {
          await a.runs.handle({ type: 'MarkStepRunLost', data: { runId: s.runId, stepRunId: s.stepRunId, decidedBy: 'ops', reason: 'unknown outcome', requestedAtMs: 5 } });
          await a.runs.handle({ type: 'MarkStepRunReady', data: { runId: s.runId, stepRunId: s.stepRunId, requestedAtMs: 6 } });
          await a.barriers.prepare(s.startCommand((await a.runs.getStepRun(s.runId, s.stepRunId))!));
        }
      }
      const events = a.db.prepare('SELECT * FROM events ORDER BY global_position').all() as EventRow[];
      const rebuilt = rebuildProjections(events);
      const all = (table: string, order: string) => a.db.prepare(`SELECT * FROM ${table} ORDER BY ${order}`).all();
      const sorted = <T>(rows: T[], key: (r: T) => string) => [...rows].sort((x, y) => key(x).localeCompare(key(y)));
      expect(all('runs', 'run_id')).to.deep.equal(sorted(rebuilt.runs, (r) => r.run_id));
      expect(all('step_runs', 'run_id, step_run_id')).to.deep.equal(sorted(rebuilt.stepRuns, (r) => `${r.run_id}\u0000${r.step_run_id}`));
      expect(all('security_audit_events', 'audit_event_id')).to.deep.equal(sorted(rebuilt.audit, (r) => r.audit_event_id));
      expect(all('trace_anchors', 'trace_id')).to.deep.equal(sorted(rebuilt.trace, (r) => r.trace_id));
      expect(all('audit_receipts', 'audit_receipt_id')).to.deep.equal(sorted(rebuilt.receipts, (r) => r.audit_receipt_id));
      expect(all('step_run_mutations', 'mutation_id')).to.deep.equal(sorted(rebuilt.mutations, (r) => r.mutation_id));
      expect(all('tool_execution_start_barriers', 'start_id')).to.deep.equal(sorted(rebuilt.barriers, (r) => r.start_id));
      expect(all('start_replay_identities', 'identity, value')).to.deep.equal(sorted(rebuilt.identities, (r) => `${r.identity}\u0000${r.value}`));
      await a.close();
    });
  });

  describe('R3.9 a crash leaves each start whole or absent', () => {
    /**
     * Every stored start verifies and is whole (the reliability harness's store check: fact
     * counts, no evidence without its StepRun move, no running StepRun without its barrier,
     * foreign keys, integrity), and every acknowledged start is there.
     */
    const assertWholeOrAbsent = async (a: SqliteStartBarrier, path: string, acknowledged: readonly string[]): Promise<number> => {
      const raw = sqliteRaw(path);
      try {
        const check = await checkStore(raw, a.barriers, { acknowledged: new Map(acknowledged.map((id) => [id, undefined])), full: true });
        expect(check.problems, describeProblems(check.problems)).to.deep.equal([]);
        expect(check.found).to.equal(acknowledged.length);
        return check.stored;
      } finally {
        await raw.close();
      }
    };

    const runWorker = async (path: string, env: Record<string, string>): Promise<{ acks: string[]; signal: NodeJS.Signals | null }> => {
      const worker = spawnTsxWorker(join(__dirname, 'fixtures', 'startWorker.ts'), [path], env);
      const { code, signal } = await worker.exited;
      if (signal === null && code !== 0) throw new Error(`worker failed (${code}): ${worker.stderr()}`);
      return { acks: worker.lines.filter((l) => l.startsWith('ACK ')).map((l) => l.split(' ')[2]!), signal };
    };

    it('R3.9 SIGKILL inside the start transaction, 20 times at varied steps: reopening shows every start whole or absent', async () => {
      const path = freshDbPath('kill');
      let acknowledged: string[] = [];
      for (let i = 0; i < 20; i++) {
        const step = START_STEPS[i % START_STEPS.length]!;
        const { acks, signal } = await runWorker(path, { KILL_AT_STEP: step, KILL_AT_START: String(i % 4), STARTS: '50' });
        expect(signal, `kill ${i} at ${step}`).to.equal('SIGKILL');
        expect(acks).to.have.length(i % 4);
        acknowledged = [...acknowledged, ...acks];
        const a = await openSqliteStartBarrier({ path });
        try {
          const stored = await assertWholeOrAbsent(a, path, acknowledged);
          expect(stored).to.equal(acknowledged.length); // the killed start never committed
        } finally {
          await a.close();
        }
      }
    });
  });

  describe('R5.3 a damaged record fails closed', () => {
    let template: string;
    let startId: string;
    let attempt: [string, string, number];

    before(async () => {
      template = freshDbPath('corrupt-template');
      const a = await openSqliteStartBarrier({ path: template });
      const s = await setUp(a, { withApproval: true });
      const r = await a.barriers.prepare(s.startCommand());
      startId = r.barrier.record.startId;
      attempt = [s.runId, s.stepRunId, r.barrier.record.attempt.startedStepRunVersion];
      await a.barriers.prepare(s.startCommand()); // a second, untouched read path
      a.db.pragma('wal_checkpoint(TRUNCATE)');
      await a.close();
    });

    const withDamage = async (damage: (db: Database.Database) => void): Promise<{ byStart: unknown; byAttempt: unknown }> => {
      const path = freshDbPath('corrupt');
      copyFileSync(template, path);
      const raw = new Database(path);
      raw.pragma('foreign_keys = OFF'); // damage is what we simulate; keys and checks must not stop it
      raw.pragma('ignore_check_constraints = ON');
      dropAllTriggers(raw);
      damage(raw);
      raw.close();
      const a = await openSqliteStartBarrier({ path });
      const outcome = async (p: Promise<unknown>) => p.then((v) => v, (e: unknown) => e);
      try {
        return { byStart: await outcome(a.barriers.getByStartId(startId)), byAttempt: await outcome(a.barriers.getByStepRunAttempt(...attempt)) };
      } finally {
        await a.close();
      }
    };

    const cellsOf = (table: string, where: string, args: unknown[]): { column: string; value: unknown }[] => {
      const raw = new Database(template, { readonly: true });
      const row = raw.prepare(`SELECT * FROM ${table} WHERE ${where}`).get(...args) as Record<string, unknown>;
      raw.close();
      return Object.entries(row).map(([column, value]) => ({ column, value }));
    };

    const tablesWithKey: [string, string, () => unknown[]][] = [
      ['tool_execution_start_barriers', 'start_id = ?', () => [startId]],
      ['security_audit_events', 'start_id = ?', () => [startId]],
      ['trace_anchors', 'start_id = ?', () => [startId]],
      ['audit_receipts', 'start_id = ?', () => [startId]],
      ['step_run_mutations', 'start_id = ?', () => [startId]],
    ];

    it('R5.3 every cell of the barrier row and of each fact row, changed alone, is detected', async () => {
      let tried = 0;
      for (const [table, where, key] of tablesWithKey) {
        for (const { column, value } of cellsOf(table, where, key())) {
          tried++;
          const { byStart, byAttempt } = await withDamage((db) => {
            db.prepare(`UPDATE ${table} SET ${column} = ? WHERE ${where}`).run(mutateCell(value), ...key());
          });
          // A damaged key can make the row unreachable from one entry point; it must then be
          // unreachable or corrupt from every entry point, never a silent different answer.
          const outcomes = [byStart, byAttempt];
          expect(outcomes.some((o) => o instanceof CorruptRecordError), `${table}.${column}: ${String(outcomes)}`).to.equal(true);
          for (const o of outcomes) expect(o === null || o instanceof CorruptRecordError, `${table}.${column}`).to.equal(true);
        }
      }
      expect(tried).to.equal(19 + 7 + 8 + 7 + 15); // every column of the five tables
    });

    it('R5.3 every cell of the five event rows, changed alone, is detected', async () => {
      const raw = new Database(template, { readonly: true });
      const rows = raw.prepare(`SELECT global_position FROM events WHERE event_type IN (${START_FACT_TYPES.map(() => '?').join(',')}) ORDER BY global_position LIMIT 5`).all(...START_FACT_TYPES) as { global_position: number }[];
      raw.close();
      for (const { global_position } of rows) {
        for (const { column, value } of cellsOf('events', 'global_position = ?', [global_position])) {
          if (column === 'global_position') continue; // the log's own ordinal, not part of a start
          const { byStart, byAttempt } = await withDamage((db) => {
            db.prepare(`UPDATE events SET ${column} = ? WHERE global_position = ?`).run(mutateCell(value), global_position);
          });
          expect(byStart, `events#${global_position}.${column}`).to.be.instanceOf(CorruptRecordError);
          expect(byAttempt, `events#${global_position}.${column}`).to.be.instanceOf(CorruptRecordError);
        }
      }
    });

    it('R5.3 a duplicated or damaged replay identity fails closed', async () => {
      for (const identity of ['startId', 'mutationId', 'runEventId', 'traceId', 'auditEventId', 'auditReceiptId', 'attempt']) {
        const { byStart, byAttempt } = await withDamage((db) => {
          db.exec('DROP INDEX start_replay_identities_key');
          db.prepare('INSERT INTO start_replay_identities SELECT * FROM start_replay_identities WHERE start_id = ? AND identity = ?').run(startId, identity);
        });
        expect(byStart, identity).to.be.instanceOf(CorruptRecordError);
        expect(byAttempt, identity).to.be.instanceOf(CorruptRecordError);
        const changed = await withDamage((db) => {
          const { command_digest } = db.prepare('SELECT command_digest FROM start_replay_identities WHERE start_id = ? AND identity = ?').get(startId, identity) as { command_digest: string };
          db.prepare('UPDATE start_replay_identities SET command_digest = ? WHERE start_id = ? AND identity = ?').run(mutateCell(command_digest), startId, identity);
        });
        expect(changed.byStart, `${identity} digest`).to.be.instanceOf(CorruptRecordError);
      }
    });

    it('R5.3 a damaged StepRun or Run head fails the start closed instead of guessing', async () => {
      const path = freshDbPath('corrupt-head');
      const a = await openSqliteStartBarrier({ path });
      const s = await setUp(a);
      const { digest } = a.db.prepare('SELECT digest FROM step_runs WHERE step_run_id = ?').get(s.stepRunId) as { digest: string };
      a.db.prepare('UPDATE step_runs SET digest = ? WHERE step_run_id = ?').run(mutateCell(digest), s.stepRunId);
      let error: unknown;
      try {
        await a.barriers.prepare(s.startCommand());
      } catch (e) {
        error = e;
      }
      expect(error).to.be.instanceOf(CorruptRecordError);
      expect(sqliteCounts(a).tool_execution_start_barriers).to.equal(0);
      await a.close();
    });
  });

  describe('R7 rejected designs are impossible', () => {
    it('R7.1/R7.2 no public path writes evidence or moves a StepRun to running on its own', async () => {
      const a = await openFreshSqlite();
      expect(Object.keys(a.barriers).sort()).to.deep.equal(['getByStartId', 'getByStepRunAttempt', 'prepare']);
      const s = await setUp(a);
      for (const type of ['SecurityAuditEventRecorded', 'StepRunStarted', 'StartStepRun', 'ToolExecutionStartBarrierCommitted']) {
        let error: unknown;
        try {
          await a.runs.handle({ type, data: { runId: s.runId, stepRunId: s.stepRunId } } as never);
        } catch (e) {
          error = e;
        }
        expect((error as { code?: string }).code, type).to.equal('VALIDATION_FAILED');
      }
      expect(sqliteCounts(a).security_audit_events).to.equal(0);
      expect((await a.runs.getStepRun(s.runId, s.stepRunId))?.status).to.equal('ready');
      await a.close();
    });

    it('R7.3 the barrier binds what a RunEvent cannot: admission, adapter contracts and evidence digests', async () => {
      const a = await openFreshSqlite();
      const s = await setUp(a);
      const { barrier } = await a.barriers.prepare(s.startCommand());
      const runEvent = (await a.runs.readStream(s.runId)).find((e) => e.event.type === 'StepRunStarted')!.event.data as Record<string, unknown>;
      for (const key of ['admission', 'contracts', 'handlerBinding', 'trace', 'audit']) {
        expect(barrier.record, key).to.have.property(key);
        expect(runEvent, key).to.not.have.property(key);
      }
      await a.close();
    });

    it('R7.4 the start identity is (run, StepRun, started version), never the StepRun id alone', async () => {
      const a = await openFreshSqlite();
      const unique = (a.db.prepare("SELECT name FROM pragma_index_list('tool_execution_start_barriers') WHERE \"unique\" = 1").all() as { name: string }[]).map(
        ({ name }) => (a.db.prepare('SELECT name FROM pragma_index_info(?)').all(name) as { name: string }[]).map((c) => c.name).join(','),
      );
      expect(unique).to.include('run_id,step_run_id,started_step_run_version');
      expect(unique).to.not.include('step_run_id');
      expect(unique).to.not.include('run_id,step_run_id');
      await a.close();
    });

    it('R7.5 the commit time comes from SQLite, not from the process clock or the caller', async () => {
      const a = await openFreshSqlite();
      const s = await setUp(a, { requestedAtMs: 42 });
      const realNow = Date.now;
      Date.now = () => 0; // if the store used the process clock, committed_at_ms would be 0
      try {
        const { barrier } = await a.barriers.prepare(s.startCommand());
        expect(barrier.committedAtMs).to.be.greaterThan(1_600_000_000_000);
        expect(barrier.record.requestedAtMs).to.equal(42);
        const stored = a.db.prepare('SELECT committed_at_ms, requested_at_ms FROM step_run_mutations').get() as { committed_at_ms: number; requested_at_ms: number };
        expect(stored).to.deep.equal({ committed_at_ms: barrier.committedAtMs, requested_at_ms: 42 });
      } finally {
        Date.now = realNow;
        await a.close();
      }
    });

    it('R7.6/R6.2 no adapter call inside the transaction: the barrier code imports no process, network or adapter I/O', () => {
      const sources = (dir: string): string[] =>
        readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
          .filter((f) => f.isFile() && f.name.endsWith('.ts'))
          .map((f) => join(f.parentPath ?? (f as unknown as { path: string }).path, f.name));
      const files = [...sources('domain'), ...sources('projections'), ...sources('infrastructure/sqlite'), join(ROOT, 'infrastructure/startProtocol.ts')];
      for (const file of files) {
        const text = readFileSync(file, 'utf8');
        expect(text, file).to.not.match(/from '(node:)?(child_process|http|https|net|dgram|worker_threads|cluster)'/);
        expect(text, file).to.not.match(/\b(setInterval|setTimeout|fs\.watch)\s*\(/);
      }
    });

    it('R7.8/R6.1 the root export carries no storage authority; domain imports no driver', () => {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const root = require('../../domain') as Record<string, unknown>;
      expect(Object.keys(root).filter((k) => /open|authority|sqlite|postgres|pool/i.test(k))).to.deep.equal([]);
      const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, { default: string }> };
      expect(pkg.exports['.']!.default).to.equal('./dist/domain/index.js');
      for (const f of readdirSync(join(ROOT, 'domain'))) {
        const text = readFileSync(join(ROOT, 'domain', f), 'utf8');
        expect(text, f).to.not.match(/from '(better-sqlite3|pg|\.\.\/infrastructure[^']*)'/);
      }
    });
  });
});
