import { expect } from 'chai';
import { CorruptRecordError } from '../../domain';
import { loadMigrations } from '../../infrastructure/migrations';
import { readSchemaObjects, schemaObjectProblems } from '../../infrastructure/postgres/schemaObjects';
import { DEFINITIONS_MADE, MADE_BY_MIGRATIONS } from '../../infrastructure/postgres/schemaObjects.made';
import { MigratedTemplate, openOn, rejects, type TestDatabase } from '../../testkit/postgresHarness';
import { buildOnce, runCli } from '../cli/cliSuite';

// R9.1: the triggers, functions and grants are the database's own refusal of a forged history.
// A schema whose objects are not the ones the migrations make is damaged, and nothing may read
// it as sound: the open refuses it, and verify on an authority already open reports it.

/** What an open must leave as it was: the ledger and the catalog's description of ql3. */
const stateOf = (db: TestDatabase): Promise<unknown> =>
  db.admin(async (c) => ({
    ledger: (await c.query('SELECT name, checksum FROM ql3.schema_migrations ORDER BY name')).rows,
    objects: await readSchemaObjects(c),
  }));

const expectRefused = async (db: TestDatabase, problem: RegExp): Promise<void> => {
  const before = await stateOf(db);
  for (const migrate of [true, false]) {
    const e = await rejects(openOn(db, { migrate }));
    expect(e, `migrate: ${migrate}`).to.be.instanceOf(CorruptRecordError);
    expect((e as CorruptRecordError).recordKind).to.equal('schema');
    expect(e.message).to.match(problem);
  }
  expect(await stateOf(db), 'nothing written').to.deep.equal(before);
};

describe('R9.1 a PostgreSQL schema holds the objects its migrations make: triggers, functions, grants, columns', function () {
  this.timeout(120_000);
  const template = new MigratedTemplate();
  before(() => buildOnce());
  after(() => template.dropAll());

  it(`R9.1 a fresh migration makes exactly what schemaObjects.made.ts lists (after a new migration: npx tsx scripts/pgSchemaObjects.ts)`, async () => {
    const db = await template.clone();
    const found = await db.admin((c) => readSchemaObjects(c));
    const objects = Object.fromEntries(found.objects);
    expect(objects, `the catalog of a fresh migration to ${loadMigrations('postgres').at(-1)?.name}`).to.deep.equal(MADE_BY_MIGRATIONS);
    expect(Object.keys(objects).filter((k) => k.startsWith('trigger ')).length).to.be.greaterThan(30);
    // The deparsed definitions are PostgreSQL's wording of one major version: the made file's.
    if (found.major === DEFINITIONS_MADE.major) expect(Object.fromEntries(found.definitions)).to.deep.equal(DEFINITIONS_MADE.byObject);
    expect(Object.keys(DEFINITIONS_MADE.byObject).filter((k) => k.startsWith('constraint ')).length).to.be.greaterThan(20);
  });

  it('R9.1 the deparsed definitions are compared on the major version the made file was written on, and on no other', async () => {
    const db = await template.clone();
    const found = await db.admin((c) => readSchemaObjects(c));
    const forged = { ...found, definitions: new Map([...found.definitions].map(([k, v]) => [k, k === 'constraint runs.runs_version_check' ? 'CHECK (true)' : v])) };
    const made = { objects: MADE_BY_MIGRATIONS, definitions: { major: found.major, byObject: Object.fromEntries(found.definitions) } };
    expect(schemaObjectProblems(forged, made)).to.deep.equal([`constraint runs.runs_version_check is defined as "CHECK (true)", the migrations defined "${found.definitions.get('constraint runs.runs_version_check')}"`]);
    expect(schemaObjectProblems({ ...forged, major: found.major + 1 }, made), 'another major words its expressions its own way').to.deep.equal([]);
  });

  it('R9.1 the catalog read pins search_path for its deparse and gives the session its own back', async () => {
    const db = await template.clone();
    const [plain, withQl3] = await db.admin(async (c) => {
      const a = await readSchemaObjects(c);
      await c.query('SET search_path = ql3, public');
      const b = await readSchemaObjects(c);
      const path = (await c.query<{ p: string }>(`SELECT current_setting('search_path') AS p`)).rows[0]!.p;
      expect(path).to.equal('ql3, public');
      await c.query('BEGIN');
      await readSchemaObjects(c);
      expect((await c.query<{ p: string }>(`SELECT current_setting('search_path') AS p`)).rows[0]!.p, 'inside a transaction').to.equal('ql3, public');
      await c.query('COMMIT');
      return [a, b];
    });
    expect(Object.fromEntries(withQl3.definitions)).to.deep.equal(Object.fromEntries(plain.definitions));
  });

  const damages: readonly (readonly [string, string, RegExp])[] = [
    [
      'a history trigger disabled',
      'ALTER TABLE ql3.events DISABLE TRIGGER events_append_run_event',
      /trigger events\.events_append_run_event is "enabled D .*", the migrations made "enabled O /,
    ],
    ['a history trigger dropped', 'DROP TRIGGER events_start_follows_log ON ql3.events', /trigger events\.events_start_follows_log is missing/],
    [
      'a trigger function made to let everything through',
      'CREATE OR REPLACE FUNCTION ql3.refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$',
      /function refuse_change\(\) is ".* body [0-9a-f]{32}", the migrations made ".* body [0-9a-f]{32}"/,
    ],
    ['UPDATE and DELETE granted to the runtime role', 'GRANT UPDATE, DELETE ON ql3.events TO ql3_runtime', /grant table events to ql3_runtime is "DELETE, SELECT, UPDATE", the migrations made "SELECT"/],
    // R14.1: the runtime inserts events only into the columns it writes, never choosing a global position
    ['INSERT on every column of events given back to the runtime role', 'GRANT INSERT ON ql3.events TO ql3_runtime', /grant table events to ql3_runtime is "INSERT, SELECT", the migrations made "SELECT"/],
    ['a column UPDATE granted to the runtime role', 'GRANT UPDATE (version) ON ql3.runs TO ql3_runtime', /grant column runs\.version to ql3_runtime \(UPDATE\) is not one the migrations made/],
    [
      'a trigger that skips outcome rows',
      `CREATE FUNCTION ql3.skip_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
       CREATE TRIGGER skip_outcomes BEFORE INSERT ON ql3.start_outcomes FOR EACH ROW EXECUTE FUNCTION ql3.skip_row()`,
      /^(?=.*trigger start_outcomes\.skip_outcomes \(.*\) is not one the migrations made)(?=.*function skip_row\(\) \(.*\) is not one the migrations made)/,
    ],
    ['the outcome read model made unlogged (emptied by a crash)', 'ALTER TABLE ql3.start_outcomes SET UNLOGGED', /table start_outcomes is "owner ql3_owner unlogged", the migrations made "owner ql3_owner logged"/],
    ['a NOT NULL dropped', 'ALTER TABLE ql3.runs ALTER COLUMN project_id DROP NOT NULL', /column runs\.project_id is "text", the migrations made "text not null"/],
    ['a table given to the runtime role', 'ALTER TABLE ql3.step_runs OWNER TO ql3_runtime', /table step_runs is "owner ql3_runtime /],
    [
      'a CHECK constraint made again under its own name, on its own column, letting every value through',
      `ALTER TABLE ql3.start_outcomes DROP CONSTRAINT start_outcomes_outcome_check;
       ALTER TABLE ql3.start_outcomes ADD CONSTRAINT start_outcomes_outcome_check CHECK (outcome IS NOT NULL OR outcome IS NULL)`,
      /constraint start_outcomes\.start_outcomes_outcome_check is defined as "CHECK \(\(\(outcome IS NOT NULL\) OR \(outcome IS NULL\)\)\)", the migrations defined "CHECK \(\(outcome = ANY/,
    ],
    [
      "a unique index made again with a predicate no row meets (its columns and 'partial' as before)",
      `DROP INDEX ql3.events_step_run_version_key;
       CREATE UNIQUE INDEX events_step_run_version_key ON ql3.events (stream_id, (data_json::json ->> 'stepRunId'), ((data_json::json ->> 'stepRunVersion')::bigint)) WHERE event_type = 'none'`,
      /index events_step_run_version_key is defined as "CREATE UNIQUE INDEX events_step_run_version_key .* WHERE \(event_type = 'none'::text\)", the migrations defined /,
    ],
    [
      'a trigger made again with a WHEN that never holds (its timing, function and WHEN flag as before)',
      `DROP TRIGGER events_start_follows_log ON ql3.events;
       CREATE TRIGGER events_start_follows_log BEFORE INSERT ON ql3.events FOR EACH ROW WHEN (NEW.event_type = 'none') EXECUTE FUNCTION ql3.start_follows_log()`,
      /trigger events\.events_start_follows_log is defined as "CREATE TRIGGER events_start_follows_log .*'none'.*", the migrations defined ".*ToolExecutionStartBarrierCommitted/,
    ],
  ];
  /** Damage only a deparsed definition shows: compared on the made file's major version alone (README). */
  const DEPARSED = /CHECK constraint made again|predicate no row meets|WHEN that never holds/;
  for (const [what, sql, problem] of damages) {
    it(`R9.1 ${what}: an open (migrate or not) raises CORRUPT_RECORD naming it, nothing written; CLI verify lists it (exit 5) (before: opened and verified as sound)`, async function () {
      const db = await template.clone();
      if (DEPARSED.test(what)) {
        const major = await db.admin(async (c) => Number((await c.query<{ v: string }>(`SELECT current_setting('server_version_num') AS v`)).rows[0]!.v) / 10000);
        if (Math.trunc(major) !== DEFINITIONS_MADE.major) this.skip();
      }
      await db.admin((c) => c.query(sql));
      await expectRefused(db, problem);
      const verify = await runCli(['verify', '--postgres', db.url]);
      expect(verify.code, verify.stderr).to.equal(5);
      const report = JSON.parse(verify.stdout) as { ok: boolean; problems: { kind: string; problem: string }[] };
      expect(report.problems.map((p) => p.kind)).to.deep.equal(['schema']);
      expect(report.problems[0]!.problem).to.match(problem);
    });
  }

  it('R9.2 a migration-ledger time changed past its digest, or a capability row changed: an open raises CORRUPT_RECORD naming it, nothing written (before: only verify reported it)', async () => {
    for (const [sql, problem] of [
      ['UPDATE ql3.schema_migrations SET applied_at_ms = applied_at_ms + 1 WHERE name = (SELECT min(name) FROM ql3.schema_migrations)', /schema_migrations row pg-0001-[\w-]+: its name, checksum and applied_at_ms \d+ do not match ledger_digest/],
      ['UPDATE ql3.capabilities SET version = version + 1', /capabilities are control-core@30, the migrations set control-core@29/],
    ] as const) {
      const db = await template.clone();
      await db.admin((c) => c.query(`BEGIN; SET LOCAL session_replication_role = replica; ${sql}; COMMIT`));
      await expectRefused(db, problem);
      const verify = await runCli(['verify', '--postgres', db.url]);
      expect(verify.code, verify.stderr).to.equal(5);
      expect(verify.stdout).to.match(problem);
    }
  });

  it('R9.1 a trigger disabled under an open authority: verify reports it (kind schema), and enabled again verify is clean', async () => {
    const db = await template.clone();
    const a = await openOn(db);
    try {
      expect((await a.recovery.verify()).ok).to.equal(true);
      await db.admin((c) => c.query('ALTER TABLE ql3.tool_execution_start_barriers DISABLE TRIGGER USER'));
      const report = await a.recovery.verify();
      expect(report.ok).to.equal(false);
      const schema = report.problems.filter((p) => p.kind === 'schema').map((p) => p.problem);
      expect(schema.length).to.be.greaterThan(0);
      for (const p of schema) expect(p).to.match(/^trigger tool_execution_start_barriers\.\w+ is "enabled D /);
      await db.admin((c) => c.query('ALTER TABLE ql3.tool_execution_start_barriers ENABLE TRIGGER USER'));
      expect((await a.recovery.verify()).ok).to.equal(true);
    } finally {
      await a.close();
    }
  });

  it("R9.1 an operator's own index, view, table and CHECK constraint are not damage: the store opens and verifies", async () => {
    const db = await template.clone();
    await db.admin((c) =>
      c.query(`CREATE INDEX ops_events_by_time ON ql3.events (committed_at_ms);
        CREATE VIEW ql3.ops_starts AS SELECT start_id FROM ql3.tool_execution_start_barriers;
        CREATE TABLE ql3.ops_notes (text text);
        ALTER TABLE ql3.start_outcomes ADD CONSTRAINT ops_known_kind CHECK (outcome <> '')`),
    );
    const a = await openOn(db, { migrate: false });
    try {
      expect(await a.recovery.verify()).to.include({ ok: true });
    } finally {
      await a.close();
    }
  });
});
