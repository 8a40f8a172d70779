import { expect } from 'chai';
import Database from 'better-sqlite3';
import { CorruptRecordError } from '../../domain';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { rejects } from '../../testkit/rejects';
import { buildOnce, runCli } from '../cli/cliSuite';
import { freshDbPath } from '../support/tmp';
import { startedScenario } from '../recovery/recoveryConformance';
import { withTriggersDropped } from '../../testkit/damage';

// R9.1: the triggers are the file's own refusal of a forged history. A file whose triggers were
// dropped, changed or joined by another is damaged, and nothing may read it as sound.

const withRaw = (path: string, body: (db: Database.Database) => void): void => {
  const db = new Database(path);
  try {
    body(db);
  } finally {
    db.close();
  }
};

const migratedStore = async (): Promise<string> => {
  const path = freshDbPath();
  await (await openSqliteStartBarrier({ path })).close();
  return path;
};

/** What an open must leave as it was: the objects, the ledger and the header. */
const stateOf = (path: string): unknown => {
  const db = new Database(path, { readonly: true });
  try {
    return {
      objects: db.prepare('SELECT type, name, sql FROM sqlite_master ORDER BY type, name').all(),
      ledger: db.prepare('SELECT name, checksum, applied_at_ms FROM schema_migrations ORDER BY name').all(),
      header: [db.pragma('user_version', { simple: true }), db.pragma('application_id', { simple: true })],
    };
  } finally {
    db.close();
  }
};

const expectRefused = async (path: string, problem: RegExp): Promise<void> => {
  const before = stateOf(path);
  for (const readOnly of [false, true]) {
    const e = await rejects(openSqliteStartBarrier({ path, readOnly }));
    expect(e, `readOnly: ${readOnly}`).to.be.instanceOf(CorruptRecordError);
    expect((e as CorruptRecordError).recordKind).to.equal('schema');
    expect(e.message).to.match(problem);
  }
  expect(stateOf(path), 'nothing written').to.deep.equal(before);
};

describe('R9.1 a SQLite file holds the schema objects its migrations make, and no other trigger', () => {
  before(function () {
    this.timeout(120_000);
    buildOnce();
  });

  it('R9.1 every trigger dropped: the write and the read-only open raise CORRUPT_RECORD naming them, nothing written; CLI verify lists it and in-doubt refuses (exit 5) (before: the file opened, read and verified as sound)', async () => {
    const path = await migratedStore();
    withRaw(path, (db) => {
      for (const { name } of db.prepare("SELECT name FROM sqlite_master WHERE type = 'trigger'").all() as { name: string }[]) db.exec(`DROP TRIGGER "${name}"`);
    });
    await expectRefused(path, /schema objects are not the ones the migrations make \(trigger \w+ is missing; .*trigger events_legal_append is missing/);
    const verify = await runCli(['verify', '--db', path]);
    expect(verify.code, verify.stderr).to.equal(5);
    const report = JSON.parse(verify.stdout) as { ok: boolean; problems: { kind: string; problem: string }[] };
    expect(report.ok).to.equal(false);
    expect(report.problems[0]!.kind).to.equal('schema');
    expect(report.problems[0]!.problem).to.match(/trigger \w+ is missing/);
    const inDoubt = await runCli(['in-doubt', '--db', path]);
    expect(inDoubt.code, inDoubt.stderr).to.equal(5);
    expect(inDoubt.stderr).to.match(/CORRUPT_RECORD/);
  });

  it('R9.1 one trigger made again with a condition that never holds: the open names it as not defined as the migrations made it', async () => {
    const path = await migratedStore();
    let name = '';
    withRaw(path, (db) => {
      const t = db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'events' ORDER BY name LIMIT 1").get() as { name: string; sql: string };
      name = t.name;
      db.exec(`DROP TRIGGER "${t.name}"`);
      db.exec(t.sql.replace(/\bBEGIN\b/, 'WHEN 0 BEGIN'));
    });
    await expectRefused(path, new RegExp(`trigger ${name} is not defined as the migrations made it`));
  });

  it('R9.1 a trigger the migrations did not make (one that skips outcome rows with RAISE(IGNORE)): the open names it', async () => {
    const path = await migratedStore();
    withRaw(path, (db) => db.exec('CREATE TRIGGER skip_outcomes BEFORE INSERT ON start_outcomes BEGIN SELECT RAISE(IGNORE); END'));
    await expectRefused(path, /trigger skip_outcomes \(on start_outcomes\) is not one the migrations made/);
  });

  it('R9.1 a table made again without its checks: the open names it', async () => {
    const path = await migratedStore();
    withRaw(path, (db) => {
      db.pragma('legacy_alter_table = ON');
      db.exec(`CREATE TABLE notes_copy AS SELECT * FROM capabilities; DROP TABLE capabilities;
        CREATE TABLE capabilities (name TEXT, version INTEGER); INSERT INTO capabilities SELECT name, version FROM notes_copy; DROP TABLE notes_copy`);
    });
    await expectRefused(path, /table capabilities is not defined as the migrations made it/);
  });

  it('R9.1 triggers dropped under an open authority: verify reports each one (kind schema), and the next open refuses', async () => {
    const path = freshDbPath();
    const a = await openSqliteStartBarrier({ path });
    try {
      expect((await a.recovery.verify()).ok).to.equal(true);
      withRaw(path, (db) => db.exec('DROP TRIGGER start_outcomes_no_update; DROP TRIGGER start_outcomes_no_delete'));
      const report = await a.recovery.verify();
      expect(report.ok).to.equal(false);
      expect(report.problems.filter((p) => p.kind === 'schema').map((p) => p.problem).sort()).to.deep.equal([
        'trigger start_outcomes_no_delete is missing',
        'trigger start_outcomes_no_update is missing',
      ]);
    } finally {
      await a.close();
    }
    await expectRefused(path, /^(?=.*trigger start_outcomes_no_delete is missing)(?=.*trigger start_outcomes_no_update is missing)/);
  });

  it('R9.1 a trigger dropped under an open authority: its next write transaction (a resolve, a start or its replay, a driver claim) and every read (barrier, StepRun, stream, recovery) raise CORRUPT_RECORD, and nothing is written; made again, reads answer and the same resolve is recorded (before: the resolve committed its outcome event without the outcome row, and the reads answered)', async () => {
    const path = freshDbPath();
    const a = await openSqliteStartBarrier({ path });
    try {
      const { s, startId, barrier } = await startedScenario(a);
      const claims = a.driverClaims();
      let guard = '';
      withRaw(path, (db) => {
        guard = (db.prepare("SELECT sql FROM sqlite_master WHERE name = 'events_project_start_outcome'").get() as { sql: string }).sql;
        db.exec('DROP TRIGGER events_project_start_outcome');
      });
      const counts = () => a.db.prepare("SELECT (SELECT count(*) FROM events) AS events, (SELECT count(*) FROM start_outcomes) AS outcomes, (SELECT count(*) FROM adapter_driver_claims) AS claims").get();
      const before = counts();
      const resolve = () => a.recovery.resolve(startId, 'completed', { decidedBy: 'ops', reason: 'tool_succeeded' });
      for (const [what, write] of [
        ['resolve', resolve],
        ['start (its exact replay)', () => a.barriers.prepare(s.startCommand())],
        ['driver claim', () => claims.claim(startId, 'driver-1', 30_000)],
      ] as const) {
        const e = await rejects((write as () => Promise<unknown>)());
        expect(e, what).to.be.instanceOf(CorruptRecordError);
        expect(e.message, what).to.match(/trigger events_project_start_outcome is missing/);
      }
      expect(counts(), 'nothing written').to.deep.equal(before);
      const reads: readonly (readonly [string, () => Promise<unknown>])[] = [
        ['getByStartId', () => a.barriers.getByStartId(startId)],
        ['getByStepRunAttempt', () => a.barriers.getByStepRunAttempt(s.runId, s.stepRunId, barrier.record.attempt.startedStepRunVersion)],
        ['getStepRun', () => a.runs.getStepRun(s.runId, s.stepRunId)],
        ['readStream', () => a.runs.readStream(s.runId)],
        ['recovery.outcome', () => a.recovery.outcome(startId)],
        ['recovery.inDoubt', () => a.recovery.inDoubt()],
        ['recovery.history', () => a.recovery.history(s.runId, s.stepRunId)],
        ['recovery.lookup', () => a.recovery.lookup('startId', startId)],
        ['driver claim history', () => claims.history(startId)],
      ];
      for (const [what, read] of reads) {
        const e = await rejects(read());
        expect(e, what).to.be.instanceOf(CorruptRecordError);
        expect(e.message, what).to.match(/trigger events_project_start_outcome is missing/);
      }
      expect((await a.recovery.verify()).problems.map((p) => p.problem), 'verify reports it').to.deep.equal(['trigger events_project_start_outcome is missing']);
      withRaw(path, (db) => db.exec(guard));
      expect((await a.barriers.getByStartId(startId))?.record.startId, 'made again: reads answer').to.equal(startId);
      expect(await a.recovery.inDoubt()).to.have.length(1);
      expect((await resolve()).status).to.equal('recorded');
      expect((await a.recovery.verify()).ok).to.equal(true);
      await claims.close();
    } finally {
      await a.close();
    }
  });

  it('R9.2 a migration-ledger time changed past its digest, or a capability row changed: the open raises CORRUPT_RECORD naming it, nothing written (before: only verify reported it)', async () => {
    for (const [table, sql, problem] of [
      ['schema_migrations', 'UPDATE schema_migrations SET applied_at_ms = applied_at_ms + 1 WHERE name = (SELECT min(name) FROM schema_migrations)', /schema_migrations row 0001-[\w-]+: its name, checksum and applied_at_ms \d+ do not match ledger_digest/],
      ['capabilities', 'UPDATE capabilities SET version = version + 1', /capabilities are local-control-core@29, the migrations set local-control-core@28/],
    ] as const) {
      const path = await migratedStore();
      withRaw(path, (db) => withTriggersDropped(db, (t) => t.tbl_name === table, () => db.exec(sql)));
      await expectRefused(path, problem);
      const verify = await runCli(['verify', '--db', path]);
      expect(verify.code, verify.stderr).to.equal(5);
      expect(verify.stdout).to.match(problem);
    }
  });

  it("R9.1 an operator's own index, view and table are not damage: the store opens and verifies", async () => {
    const path = await migratedStore();
    withRaw(path, (db) =>
      db.exec(`CREATE INDEX ops_events_by_time ON events (committed_at_ms);
        CREATE VIEW ops_starts AS SELECT start_id FROM tool_execution_start_barriers;
        CREATE TABLE ops_notes (text TEXT)`),
    );
    const a = await openSqliteStartBarrier({ path });
    try {
      expect(await a.recovery.verify()).to.include({ ok: true });
    } finally {
      await a.close();
    }
  });
});
