import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { MigratedTemplate, createDatabase } from '../../testkit/postgresHarness';
import { freshDir } from '../support/tmp';
import { CLI, ROOT, buildOnce, exampleScenario, json, runCli, type CliResult, type Example } from './cliSuite';

// The CLI as a hostile or careless operator drives it (built bin, child processes): text with
// two meanings (R10.1), sources that never end, replays compared byte for byte (R4.2), and read
// commands pointed at files and databases that are not barrier stores (R10.3).

/** The CLI fed 64 KiB chunks on stdin until it exits: it must stop reading, not drain the source. */
const runCliEndlessStdin = (args: readonly string[]): Promise<CliResult & { fed: number }> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT });
    let stdout = '';
    let stderr = '';
    let fed = 0;
    let open = true;
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    const feed = (): void => {
      while (open && child.stdin.write(chunk)) fed += chunk.length;
      if (open) child.stdin.once('drain', feed);
    };
    child.stdin.on('error', () => undefined); // EPIPE: the CLI stopped reading, as it should
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      open = false;
      resolve({ code, stdout, stderr, fed });
    });
    feed();
  });

const fileWith = (content: string | Uint8Array): string => {
  const path = join(freshDir('cli-hostile'), 'command.json');
  writeFileSync(path, content);
  return path;
};

const refused = (r: CliResult, path: string): void => {
  expect(r.code, `stderr: ${r.stderr}`).to.equal(2);
  expect(r.stderr).to.contain('VALIDATION_FAILED');
  expect(r.stderr).to.contain(`${path}:`);
  expect(r.stdout).to.equal('');
};

const HOSTILE: readonly (readonly [string, (text: string) => string | Uint8Array, string])[] = [
  ['a duplicate key ("profile" twice: last one would win)', (t) => t.replace('"profile": "standard"', '"profile": "../../etc/passwd", "profile": "standard"'), 'admission.profile'],
  ['a UTF-8 BOM', (t) => new Uint8Array([0xef, 0xbb, 0xbf, ...Buffer.from(t)]), '(root)'],
  ['1e-400 (stored as 0 before)', (t) => t.replace('"timeoutMs": 30000', '"timeoutMs": 1e-400'), 'admission.timeoutMs'],
  ['7.0000000000000001 (stored as 7 before)', (t) => t.replace('"policyVersion": 7', '"policyVersion": 7.0000000000000001'), 'admission.policyFence.policyVersion'],
  ['-0 (echoed as -0, stored as 0 before)', (t) => t.replace('"timeoutMs": 30000', '"timeoutMs": -0'), 'admission.timeoutMs'],
];

const writeAndInputCases = (name: string, open: () => Promise<{ args: string[]; close(): Promise<void> }>) => {
  describe(`CLI hostile input: ${name}`, function () {
    this.timeout(120_000);
    let db: { args: string[]; close(): Promise<void> };
    const cli = (args: readonly string[], stdin?: Buffer | string) => runCli([...db.args, ...args], stdin);
    before(() => buildOnce());
    beforeEach(async () => {
      db = await open();
    });
    afterEach(() => db.close());

    const ready = async (): Promise<Example> => {
      const ex = exampleScenario();
      json(await cli(['apply', '--command', '-'], JSON.stringify(ex.lifecycle)));
      return ex;
    };

    for (const [what, change, path] of HOSTILE) {
      it(`R10.1 prepare refuses ${what} by file and by stdin (exit 2, path ${path}); the clean command then creates`, async () => {
        const ex = await ready();
        const text = JSON.stringify(ex.start, null, 1).replace(/\n */g, ' ');
        const hostile = change(text);
        refused(await cli(['prepare', '--command', fileWith(hostile)]), path);
        refused(await cli(['prepare', '--command', '-'], Buffer.from(hostile)), path);
        expect(json<{ outcome: string }>(await cli(['prepare', '--command', fileWith(text)])).outcome).to.equal('created');
      });
    }

    it('R10.1 apply refuses a lifecycle command with a duplicate key (file and stdin); nothing is applied', async () => {
      const ex = exampleScenario();
      const text = JSON.stringify(ex.lifecycle[0]).replace('"runId":', '"runId":"other-run","runId":');
      refused(await cli(['apply', '--command', fileWith(text)]), 'data.runId');
      refused(await cli(['apply', '--command', '-'], text), 'data.runId');
      expect(json<unknown[]>(await cli(['apply', '--command', '-'], JSON.stringify(ex.lifecycle)))).to.have.length(3);
    });

    it('CLI reads at most 1 MiB + 1 byte of any --command source: /dev/zero, a 100 MB file and an endless stdin are refused as too large', async () => {
      const big = join(freshDir('cli-big'), 'big.json');
      writeFileSync(big, '');
      truncateSync(big, 100 * 1024 * 1024); // sparse: costs no disk
      for (const source of ['/dev/zero', big]) {
        const r = await cli(['prepare', '--command', source]);
        expect(r.code, r.stderr).to.equal(2);
        expect(r.stderr).to.contain('too_large');
      }
      const r = await runCliEndlessStdin([...db.args, 'apply', '--command', '-']);
      expect(r.code, r.stderr).to.equal(2);
      expect(r.stderr).to.contain('too_large');
    });

    it('R10.2 resolve --reason takes a code: "" and free text (secrets, prose) are refused (exit 2, nothing written); a note is kept apart and purge-note leaves verify green, reporting "purged"', async () => {
      const ex = await ready();
      json(await cli(['prepare', '--command', '-'], JSON.stringify(ex.start)));
      const id = ex.start.startId;
      for (const reason of ['', 'tool log shows exit 0 at 02:41', 'Authorization: Bearer abc', 'sk_live_4eC39HqLyjWDarjtT1zdp7dc', '-----BEGIN PRIVATE KEY-----']) {
        refused(await cli(['resolve', id, 'lost', '--reason', reason]), 'options.reason');
      }
      refused(await cli(['resolve', id, 'lost', '--reason', 'worker_lost', '--ticket', 'https://jira.example/OPS-1']), 'options.ticket');
      expect(json<unknown[]>(await cli(['in-doubt']))).to.have.length(1);

      const note = 'DBA says the job never ran; creds u:pw@db.internal:5432 were in the log';
      const resolved = json<{ outcome: { reason: string; ticket: string; noteDigest: string } }>(
        await cli(['resolve', id, 'lost', '--reason', 'no_trace_of_tool', '--ticket', 'OPS-1234', '--note', note]),
      );
      expect(resolved.outcome).to.include({ reason: 'no_trace_of_tool', ticket: 'OPS-1234' });
      expect(json<{ status: string; text: string }>(await cli(['note', id]))).to.include({ status: 'present', text: note });
      expect(json<{ notes: unknown }>(await cli(['verify'])).notes).to.deep.equal({ present: 1, purged: 0 });
      expect(json<{ status: string }>(await cli(['purge-note', id])).status).to.equal('purged');
      const shown = json<{ status: string; noteDigest: string }>(await cli(['note', id]));
      expect(shown).to.include({ status: 'purged', noteDigest: resolved.outcome.noteDigest });
      expect(JSON.stringify(shown)).to.not.contain('u:pw');
      const verified = json<{ ok: boolean; notes: unknown }>(await cli(['verify']));
      expect(verified).to.deep.include({ ok: true, notes: { present: 0, purged: 1 } });
    });

    it('R4.2 a replayed prepare prints the same bytes as the first, but for the outcome word', async () => {
      const ex = await ready();
      const path = fileWith(JSON.stringify(ex.start));
      const created = await cli(['prepare', '--command', path]);
      const existing = await cli(['prepare', '--command', '-'], JSON.stringify(ex.start, null, 4));
      expect(created.code).to.equal(0);
      expect(existing.code).to.equal(0);
      expect(existing.stdout).to.contain('"outcome": "existing"');
      expect(existing.stdout).to.equal(created.stdout.replace('"outcome": "created"', '"outcome": "existing"'));
      const shown = json<{ barrier: unknown }>(await cli(['show', '--start-id', ex.start.startId]));
      expect(JSON.stringify(shown.barrier)).to.equal(JSON.stringify((JSON.parse(created.stdout) as { barrier: unknown }).barrier));
    });
  });
};

const hashOf = (path: string): string => createHash('sha256').update(readFileSync(path)).digest('hex');
const READ_COMMANDS: readonly (readonly string[])[] = [['show', '--start-id', 'start-1'], ['history', 'run-1', 'step-1'], ['in-doubt'], ['verify']];

describe('qinglong-barrier CLI: hostile input and read-only reads', function () {
  this.timeout(180_000);
  before(() => buildOnce());

  writeAndInputCases('SQLite', async () => ({ args: ['--db', join(freshDir('cli-hostile-db'), 'barrier.db')], close: async () => undefined }));

  const template = new MigratedTemplate();
  after(() => template.dropAll());
  writeAndInputCases('PostgreSQL', async () => {
    const db = await template.clone();
    return { args: ['--postgres', db.url], close: () => db.drop() };
  });

  describe('R10.3 SQLite read commands never create, migrate or change a file', () => {
    const foreignFiles: readonly (readonly [string, (path: string) => void])[] = [
      ['another application\'s SQLite database', (p) => {
        const d = new Database(p);
        d.exec("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total TEXT); INSERT INTO invoices (total) VALUES ('12.50')");
        d.close();
      }],
      ['a 0-byte file', (p) => writeFileSync(p, '')],
      ['a text file', (p) => writeFileSync(p, 'hello, not a database\n')],
      ['an SQLite file with another application id', (p) => {
        const d = new Database(p);
        d.pragma('application_id = 42');
        d.exec('CREATE TABLE t (x)');
        d.close();
      }],
    ];
    for (const [what, make] of foreignFiles) {
      it(`R10.3 show, history, in-doubt and verify refuse ${what} (exit 2, a clear message), leaving it byte-identical; apply and prepare refuse it too`, async () => {
        const path = join(freshDir('cli-foreign'), 'other.db');
        make(path);
        const hash = hashOf(path);
        const files = readdirSync(dirname(path));
        for (const command of READ_COMMANDS) {
          const r = await runCli(['--db', path, ...command]);
          expect(r.code, `${command[0]}: ${r.stderr}`).to.equal(2);
          expect(r.stderr).to.contain('is not a start barrier database');
          expect(hashOf(path), command[0]).to.equal(hash);
          expect(readdirSync(dirname(path)), `${command[0]} left no -wal/-shm/journal`).to.deep.equal(files);
        }
        if (what !== 'a 0-byte file') {
          const ex = exampleScenario();
          expect((await runCli(['--db', path, 'apply', '--command', '-'], JSON.stringify(ex.lifecycle))).code).to.equal(2);
          expect(hashOf(path)).to.equal(hash);
        }
      });
    }

    it('R10.1 --db naming a directory is bad input for every command (exit 2, the usual message, no driver error); nothing is created in it', async () => {
      const dir = freshDir('cli-db-dir');
      const ex = exampleScenario();
      const commands = [...READ_COMMANDS, ['migrate'], ['apply', '--command', '-'], ['prepare', '--command', '-']];
      for (const command of commands) {
        const r = await runCli(['--db', dir, ...command], command[0] === 'apply' ? JSON.stringify(ex.lifecycle) : command[0] === 'prepare' ? JSON.stringify(ex.start) : undefined);
        expect(r.code, `${command[0]}: ${r.stderr}`).to.equal(2);
        expect(r.stderr, command[0]).to.contain('VALIDATION_FAILED').and.contain(`--db must name a SQLite database file, but ${dir} is a directory`);
        expect(r.stderr, command[0]).not.to.match(/EISDIR|SqliteError|at .*\.js/);
        expect(readdirSync(dir), command[0]).to.deep.equal([]);
      }
      const env = await runCli(['in-doubt'], undefined, { QINGLONG_BARRIER_DB: dir });
      expect(env.code, env.stderr).to.equal(2);
      expect(env.stderr).to.contain('is a directory');
    });

    it('R10.3 a missing file is not created by a read command (exit 1)', async () => {
      const path = join(freshDir('cli-missing'), 'nothing.db');
      for (const command of READ_COMMANDS) {
        const r = await runCli(['--db', path, ...command]);
        expect(r.code, r.stderr).to.equal(1);
        expect(existsSync(path)).to.equal(false);
      }
    });

    it('R10.3 read commands on a barrier database leave its file byte-identical; the file names itself (application_id, user_version)', async () => {
      const path = join(freshDir('cli-barrier'), 'barrier.db');
      const ex = exampleScenario();
      json(await runCli(['--db', path, 'apply', '--command', '-'], JSON.stringify(ex.lifecycle)));
      json(await runCli(['--db', path, 'prepare', '--command', '-'], JSON.stringify(ex.start)));
      const header = readFileSync(path).subarray(0, 100);
      expect(header.readInt32BE(68), 'application_id').to.equal(0x51424152);
      expect(header.readInt32BE(60), 'user_version').to.equal(57); // the number of the last migration, 0057-start-barrier-schema
      const hash = hashOf(path);
      for (const command of [['show', '--start-id', ex.start.startId], ['history', ex.start.stepRun.runId, ex.start.stepRun.stepRunId], ['in-doubt'], ['verify']]) {
        const r = await runCli(['--db', path, ...command]);
        expect(r.code, r.stderr).to.equal(0);
        expect(hashOf(path), command[0]).to.equal(hash);
      }
    });

    it('R10.3 migrate creates a barrier database and is idempotent; it refuses a foreign file', async () => {
      const path = join(freshDir('cli-migrate'), 'barrier.db');
      const first = json<{ applied: string[] }>(await runCli(['--db', path, 'migrate']));
      expect(first.applied).to.include('0057-start-barrier-schema');
      expect(json<{ applied: string[] }>(await runCli(['--db', path, 'migrate'])).applied).to.deep.equal([]);
      expect(json<unknown[]>(await runCli(['--db', path, 'in-doubt']))).to.deep.equal([]);
      const foreign = join(freshDir('cli-migrate'), 'other.db');
      const d = new Database(foreign);
      d.exec('CREATE TABLE invoices (id INTEGER)');
      d.close();
      const hash = hashOf(foreign);
      expect((await runCli(['--db', foreign, 'migrate'])).code).to.equal(2);
      expect(hashOf(foreign)).to.equal(hash);
    });
  });

  describe('R10.3 PostgreSQL read commands never migrate', () => {
    it('R10.3 on an empty database show, history, in-doubt and verify fail without creating schema ql3; migrate creates it', async () => {
      const db = await createDatabase();
      try {
        for (const command of READ_COMMANDS) {
          const r = await runCli(['--postgres', db.url, ...command]);
          expect(r.code, `${command[0]}: ${r.stderr}`).to.equal(1);
          expect(r.stderr).to.contain('ask the owner to run migrate');
          const schemas = await db.admin(async (c) => (await c.query("SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'ql3'")).rows[0] as { n: number });
          expect(schemas.n, command[0]).to.equal(0);
        }
        const migrated = json<{ applied: string[] }>(await runCli(['--postgres', db.url, 'migrate']));
        expect(migrated.applied).to.include('pg-0030-tool-execution-start-barriers');
        expect(json<{ applied: string[] }>(await runCli(['--postgres', db.url, 'migrate'])).applied).to.deep.equal([]);
        expect(json<unknown[]>(await runCli(['--postgres', db.url, 'in-doubt']))).to.deep.equal([]);
      } finally {
        await db.drop();
      }
    });
  });
});
