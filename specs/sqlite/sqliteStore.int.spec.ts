import { existsSync } from 'node:fs';
import { attemptValue } from '../../projections/rows';
import { expect } from 'chai';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { CorruptRecordError } from '../../domain';
import { mutateCell } from '../../testkit/damage';
import { openSqliteStartBarrier, MigrationError } from '../../infrastructure/sqlite';
import { rejects } from '../../testkit/rejects';
import { openMemoryStartBarrier } from '../../infrastructure/memory/memoryAuthority';
import { LOOKUP_REPLAY, SELECT_RUN_HEAD, SELECT_START_HEAD, SELECT_STEP_RUN, CAS_STEP_RUN, CAS_STREAM, SELECT_ATTEMPT } from '../../infrastructure/sqlite/sql';
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
          'step_run_mutations', 'tool_execution_start_barriers', 'capabilities', 'schema_migrations',
        ]);
        // the replay identities are the facts' own keys: no table of their own
        expect(names('table')).to.not.include('start_replay_identities');
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
      raw2.prepare("INSERT INTO schema_migrations (name, checksum, applied_at_ms) VALUES ('9999-from-the-future', 'sha256:x', 0)").run();
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

  describe('R10.1 open options have one meaning', () => {
    it('R10.1 an unknown option (a misspelt synchronous), a synchronous other than FULL or NORMAL, a bad busy timeout or path is refused before any file is made', async () => {
      const path = freshDbPath();
      for (const [options, message] of [
        [{ path, synchronus: 'NORMAL' }, /unknown option "synchronus"/],
        [{ path, synchronous: 'OFF' }, /synchronous must be "FULL" or "NORMAL", got "OFF"/],
        [{ path, busyTimeoutMs: -1 }, /busyTimeoutMs must be an integer/],
        [{ path, readOnly: 'yes' }, /readOnly must be true or false/],
        [{ path: 42 }, /path must be a file path/],
        [{ path, database: {} }, /give path or database, not both/],
        [{ path, hooks: { onStartstep: () => undefined } }, /unknown option "onStartstep"/],
        [{ path, hooks: { onStartStep: 'log' } }, /hooks.onStartStep must be a function/],
        [undefined, /SQLite options must be an object/],
      ] as const) {
        const e = await rejects(openSqliteStartBarrier(options as never));
        expect(e, JSON.stringify(options)).to.be.instanceOf(RangeError);
        expect(e.message).to.match(message);
      }
      expect(existsSync(path)).to.equal(false);
      await (await openSqliteStartBarrier({ path, synchronous: 'NORMAL', busyTimeoutMs: 0 })).close();
    });

    it('R10.1 the in-memory authority refuses an unknown option too', async () => {
      expect((await rejects(openMemoryStartBarrier({ clok: () => 1 } as never))).message).to.match(/unknown option "clok"/);
      expect((await rejects(openMemoryStartBarrier({ clock: 1_790_000_000_000 } as never))).message).to.match(/clock must be a function/);
      expect((await rejects(openMemoryStartBarrier({ hooks: { onStartstep: () => undefined } } as never))).message).to.match(/unknown option "onStartstep"/);
    });
  });

  describe('R9.3 a migration ledger that lost rows is refused on open, typed, nothing applied', () => {
    for (const [what, where] of [
      ['its last row', 'name = (SELECT max(name) FROM schema_migrations)'],
      ['every row', '1 = 1'],
    ] as const) {
      it(`R9.3 ${what} deleted: MIGRATION_REFUSED naming the header and the ledger's end, the file as it was (before: a raw SQLITE_ERROR from applying a migration again)`, async () => {
        const path = freshDbPath();
        await (await openSqliteStartBarrier({ path })).close();
        const raw = new Database(path);
        const guards = raw.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'schema_migrations'").all() as { name: string; sql: string }[];
        for (const g of guards) raw.exec(`DROP TRIGGER ${g.name}`);
        raw.exec(`DELETE FROM schema_migrations WHERE ${where}`);
        for (const g of guards) raw.exec(g.sql);
        const before = raw.prepare("SELECT count(*) AS n FROM schema_migrations UNION ALL SELECT count(*) FROM sqlite_master").all();
        raw.close();
        const error = await rejects(openSqliteStartBarrier({ path }));
        expect(error).to.be.instanceOf(MigrationError);
        expect((error as MigrationError).code).to.equal('MIGRATION_REFUSED');
        expect(error.message).to.match(/file header says migration \d+ was applied, but the ledger \(schema_migrations\) ends at .*: ledger rows are missing/);
        const after = new Database(path, { readonly: true });
        try {
          expect(after.prepare("SELECT count(*) AS n FROM schema_migrations UNION ALL SELECT count(*) FROM sqlite_master").all()).to.deep.equal(before);
        } finally {
          after.close();
        }
      });
    }
  });

  describe('R9.3 a file header past its migration ledger is damage on every path, not only the write open', () => {
    it('R9.3 user_version set past the ledger: a read-only open is MIGRATION_REFUSED, and verify on an open authority reports it (before: both answered as sound)', async () => {
      const path = freshDbPath();
      const a = await openSqliteStartBarrier({ path });
      const raw = new Database(path);
      raw.pragma('user_version = 99');
      raw.close();
      const report = await a.recovery.verify();
      expect(report.ok).to.equal(false);
      expect(report.problems.map((p) => `${p.kind} ${p.problem}`).join(' | ')).to.match(/schema the file header says migration 99 was applied, but the ledger/);
      await a.close();
      const error = await rejects(openSqliteStartBarrier({ path, readOnly: true }));
      expect(error).to.be.instanceOf(MigrationError);
      expect(error.message).to.match(/file header says migration 99 was applied/);
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
        ['tool_execution_start_barriers', 'barrier_digest'],
      ] as const) {
        expect(() => a.db.prepare(`UPDATE ${table} SET ${column} = 'x'`).run(), table).to.throw(/append-only|immutable/);
        expect(() => a.db.prepare(`DELETE FROM ${table}`).run(), table).to.throw(/append-only|immutable/);
      }
      await a.close();
    });

    it('R6.4 replay and start lookups use unique indexes, never a scan of the history', async () => {
      const a = await openFreshSqlite();
      const named = { status: 'x', version: 1, digest: 'x', state_json: 'x', run_id: 'x', step_run_id: 'x', expected_version: 1, expected_status: 'x', expected_digest: 'x' };
      for (const sql of [LOOKUP_REPLAY, SELECT_RUN_HEAD, SELECT_START_HEAD, SELECT_STEP_RUN, SELECT_ATTEMPT, CAS_STEP_RUN, CAS_STREAM]) {
        const statement = a.db.prepare(`EXPLAIN QUERY PLAN ${sql}`);
        const args = sql.includes('@') ? [named] : Array.from({ length: (sql.match(/\?/g) ?? []).length }, () => 'x');
        const plan = (statement.all(...args) as { detail: string }[]).map((r) => r.detail);
        for (const step of plan) expect(step, `${sql}\n${plan.join('\n')}`).to.not.match(/^SCAN (events|security_audit_events|trace_anchors|audit_receipts|step_run_mutations|tool_execution_start_barriers|step_runs|runs|streams)\b/);
      }
      await a.close();
    });
  });

  // The rebuild-from-log comparison runs on every backend: specs/conformance/rebuildConformance.ts.

  // R3.9 crashes (SIGKILL after each step; 20 kills at varied steps, every start whole or
  // absent): specs/conformance/crashConformance.ts on every SQL backend.

  describe('R5.3 a damaged record fails closed', () => {
    // Every cell of the barrier, fact, event and replay-identity rows, and duplicated identities:
    // specs/conformance/damageConformance.ts on every backend (specs/sqlite/damage.int.spec.ts).

    it('R5.3 a damaged StepRun or Run head fails the start closed instead of guessing', async () => {
      const path = freshDbPath('corrupt-head');
      const a = await openSqliteStartBarrier({ path });
      const s = await setUp(a);
      const { digest } = a.db.prepare('SELECT digest FROM step_runs WHERE step_run_id = ?').get(s.stepRunId) as { digest: string };
      // a process that drops the guard trigger (R9.1) gets the rewrite past the database; the read does not
      a.db.exec('DROP TRIGGER step_runs_legal_move');
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
      // Each identity is the key of the row that holds it: the barrier's own keys are its startId and
      // its attempt (run, StepRun, started version), whose canonical value is the JSON array below.
      expect(unique.sort()).to.deep.equal(['run_id,step_run_id,started_step_run_version', 'start_id']);
      expect(attemptValue('r', 's', 3)).to.equal('["r","s",3]');
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
      const files = [...sources('domain'), ...sources('projections'), ...sources('infrastructure/sqlite'), ...sources('application')];
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
