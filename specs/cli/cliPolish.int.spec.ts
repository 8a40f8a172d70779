import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import type { Command, Option } from 'commander';
import { decodeLifecycleCommand, decodeStartCommand, type ToolExecutionStartCommand } from '../../domain';
import { buildProgram } from '../../infrastructure/cli/main';
import { createVerifyBar } from '../../infrastructure/cli/verifyBar';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { VERIFY_PHASES, type VerifyPhase } from '../../application/verifyProgress';
import { buildScenario } from '../../domain/scenario';
import { createDatabase, type TestDatabase } from '../../testkit/postgresHarness';
import { freshDbPath, freshDir } from '../support/tmp';
import { ROOT, buildOnce, json, runCli } from './cliSuite';

// R6.1: the operator CLI as a user meets it: discoverable (--version, help that lists every
// option with its description and the global --db/--postgres in every command's help, no
// command is an error), files from `example --out` that apply/prepare take as they are, a
// retry after `lost` without hand-edited ids, and clear typed errors for a bad URL.

const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

describe('R6.1 qinglong-barrier: discoverable commands and typed errors', function () {
  this.timeout(120_000);
  before(() => buildOnce());

  it('R6.1 --version prints the package version and exits 0', async () => {
    const r = await runCli(['--version']);
    expect([r.code, r.stdout.trim()]).to.deep.equal([0, VERSION]);
  });

  it('R6.1 no command exits 2 with the help on stderr (nothing on stdout); an unknown command exits 2 naming it', async () => {
    const none = await runCli([]);
    expect(none.code).to.equal(2);
    expect(none.stdout).to.equal('');
    expect(none.stderr).to.include('Usage: qinglong-barrier');
    const unknown = await runCli(['frobnicate']);
    expect(unknown.code).to.equal(2);
    expect(unknown.stderr).to.include("unknown command 'frobnicate'");
  });

  it('R10.1 one input, one meaning: a value option given twice, or an argument no command takes, exits 2 naming it; nothing is opened or written', async () => {
    const db = freshDbPath('cli-one-meaning');
    const cases: [string[], string][] = [
      [['--db', db, 'in-doubt', '--limit', '5', '--limit', '6'], '--limit: given more than once'],
      [['--db', db, 'show', '--start-id', 's1', '--start-id', 's2'], '--start-id: given more than once'],
      [['--db', db, 'in-doubt', '--db', freshDbPath('cli-other')], '--db: given more than once'],
      [['--db', db, 'prepare', '--command', '-', '--command', '-'], '--command: given more than once'],
      [['--db', db, 'verify', 'extra'], "too many arguments for 'verify'"],
      [['--db', db, 'history', 'run-1', 'step-1', 'extra'], "too many arguments for 'history'"],
    ];
    for (const [args, message] of cases) {
      const r = await runCli(args);
      expect([r.code, r.stdout], args.join(' ')).to.deep.equal([2, '']);
      expect(r.stderr, args.join(' ')).to.include(message);
    }
    expect(existsSync(db)).to.equal(false);
  });

  it('R6.1 every option of every command has a description, and every command help lists the global --db and --postgres', () => {
    const program = buildProgram();
    const undocumented = (c: Command) => (c.options as readonly Option[]).filter((o) => o.description.trim() === '').map((o) => `${c.name()} ${o.flags}`);
    expect(undocumented(program)).to.deep.equal([]);
    for (const command of program.commands) {
      expect(undocumented(command)).to.deep.equal([]);
      const help = command.helpInformation();
      expect(help, command.name()).to.include('--db <path>').and.include('--postgres <url>').and.include('Global Options');
    }
    expect(program.commands.map((c) => c.name())).to.include.members(['example', 'apply', 'prepare', 'show', 'history', 'in-doubt', 'resolve', 'retry', 'verify']);
  });

  it('R6.1 a --postgres value that is not a URL is a clear CONNECTION_FAILED error, exit 2, with no driver noise', async () => {
    const r = await runCli(['--postgres', 'notaurl', 'in-doubt']);
    expect(r.code).to.equal(2);
    expect(r.stderr).to.include('CONNECTION_FAILED').and.include('not a PostgreSQL connection string');
    expect(r.stderr).not.to.include('ENOTFOUND');
  });

  it('R6.1 verify reports its phase with weighted progress that only grows and ends at the total; the bar is drawn only on a terminal', async () => {
    const authority = await openSqliteStartBarrier({ path: freshDbPath('verify-progress') });
    try {
      for (let i = 0; i < 3; i++) {
        const s = buildScenario();
        for (const c of s.lifecycle) await authority.runs.handle(c);
        await authority.barriers.prepare(s.startCommand());
      }
      const seen: [number, number, VerifyPhase][] = [];
      const report = await authority.recovery.verify({ onProgress: (done, total, phase) => seen.push([done, total, phase]) });
      expect(report.ok).to.equal(true);
      const phases = [...new Set(seen.map(([, , p]) => p))];
      expect(phases, 'in order; a phase with no records may report nothing').to.deep.equal(VERIFY_PHASES.filter((p) => phases.includes(p)));
      expect(phases).to.include.members(['barriers', 'events', 'integrity']);
      seen.forEach(([done], i) => expect(done).to.be.at.least(i === 0 ? 0 : seen[i - 1]![0]));
      const [lastDone, lastTotal] = seen[seen.length - 1]!;
      expect(lastDone).to.equal(lastTotal);
    } finally {
      await authority.close();
    }
    expect(createVerifyBar({ isTTY: false } as NodeJS.WriteStream)).to.equal(undefined);
  });

  for (const backend of ['SQLite', 'PostgreSQL'] as const) {
    describe(`on ${backend}`, () => {
      let args: string[] = [];
      let pg: TestDatabase | undefined;
      beforeEach(async () => {
        if (backend === 'PostgreSQL') {
          pg = await createDatabase();
          args = ['--postgres', pg.url];
        } else {
          args = ['--db', freshDbPath('cli-polish')];
        }
      });
      afterEach(async () => {
        await pg?.drop();
        pg = undefined;
      });

      it('R6.1 example --out DIR writes lifecycle.json and start.json that apply and prepare take exactly as they are', async () => {
        const dir = join(freshDir('cli-example'), 'scenario');
        const files = json<{ lifecycle: string; start: string; next: string[] }>(await runCli(['example', '--out', dir]));
        expect(files.next).to.have.length(2);
        const lifecycle = JSON.parse(readFileSync(files.lifecycle, 'utf8')) as unknown[];
        expect(lifecycle.map((c) => decodeLifecycleCommand(c).type)).to.deep.equal(['CreateRun', 'CreateStepRun', 'MarkStepRunReady']);
        expect(json<unknown[]>(await runCli([...args, 'apply', '--command', files.lifecycle]))).to.have.length(3);
        expect(json<{ outcome: string }>(await runCli([...args, 'prepare', '--command', files.start])).outcome).to.equal('created');
      });

      it('R4.4 R6.1 retry RUN STEP after lost: ready again, and the next attempt start command is printed; prepare takes it as it is', async () => {
        const dir = freshDir('cli-retry');
        const files = json<{ lifecycle: string; start: string }>(await runCli(['example', '--out', dir]));
        json(await runCli([...args, 'apply', '--command', files.lifecycle]));
        const first = JSON.parse(readFileSync(files.start, 'utf8')) as ToolExecutionStartCommand;
        json(await runCli([...args, 'prepare', '--command', files.start]));
        const { runId, stepRunId } = first.stepRun;

        const tooEarly = await runCli([...args, 'retry', runId, stepRunId]);
        expect(tooEarly.code, 'the attempt is still running: resolve it first').to.equal(3);

        json(await runCli([...args, 'resolve', first.startId, 'lost', '--reason', 'worker_lost', '--by', 'oncall']));
        const out = join(dir, 'retry.json');
        const retry = await runCli([...args, 'retry', runId, stepRunId, '--out', out]);
        const next = json<ToolExecutionStartCommand>(retry);
        expect(retry.stderr).to.include('lost -> ready');
        expect(decodeStartCommand(next).command.stepRun.expectedVersion, 'ready -> running -> lost -> ready').to.equal(first.stepRun.expectedVersion + 3);
        expect(next.startId).not.to.equal(first.startId);
        expect(JSON.parse(readFileSync(out, 'utf8'))).to.deep.equal(next);

        const again = json<ToolExecutionStartCommand>(await runCli([...args, 'retry', runId, stepRunId]));
        expect(again.startId, 'the same attempt gets the same ids: prepare would replay, never start twice').to.equal(next.startId);
        const prepared = json<{ outcome: string; barrier: { record: { attempt: { startedStepRunVersion: number } } } }>(await runCli([...args, 'prepare', '--command', out]));
        expect(prepared.outcome).to.equal('created');
        expect(prepared.barrier.record.attempt.startedStepRunVersion).to.equal(next.stepRun.expectedVersion + 1);
      });
    });
  }
});
