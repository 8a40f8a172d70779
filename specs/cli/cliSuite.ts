import { spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import {
  decodeLifecycleCommand,
  decodeStartCommand,
  type LifecycleCommand,
  type ToolExecutionStartCommand,
} from '../../domain';
import { exampleScenario as cliExample, printedExample } from '../../infrastructure/cli/exampleFiles';
import { freshDir } from '../support/tmp';

// The built CLI (`dist/infrastructure/cli/main.js`, the package `bin`) run as a child process
// against a real database, exactly as an operator or a script runs it: JSON on stdout, human
// errors on stderr, and the documented exit code for every kind of outcome.

export const ROOT = join(__dirname, '..', '..');
export const CLI = join(ROOT, 'dist', 'infrastructure', 'cli', 'main.js');

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export const runCli = (args: readonly string[], stdin?: Buffer | string, env: NodeJS.ProcessEnv = {}): Promise<CliResult> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, env: { ...process.env, QINGLONG_OPERATOR: 'spec-operator', ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin ?? '');
  });

/** Build once per run (the specs test the compiled bin, not the sources); `npm test` built it already. */
export const buildOnce = (() => {
  let built = process.env.SB_PREBUILT === '1';
  return (): void => {
    if (built) return;
    const r = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], { cwd: ROOT, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`npm run build failed:\n${r.stdout}${r.stderr}`);
    built = true;
  };
})();

export const json = <T = unknown>(r: CliResult): T => {
  expect(r.code, `exit code; stderr: ${r.stderr}`).to.equal(0);
  return JSON.parse(r.stdout) as T;
};

export interface CliBackend {
  readonly name: string;
  /** A fresh, empty database for one test: its CLI arguments and its owner's tools. */
  open(): Promise<CliDatabase>;
}

export interface CliDatabase {
  readonly args: readonly string[];
  /** Simulate damage: change a mirror column of the barrier row behind the append-only trigger. */
  corruptBarrier(startId: string): Promise<void>;
  /** Hold the write lock (SQLite) or the Run's row lock (PostgreSQL) until `release`. */
  holdLock(runId: string): Promise<{ release(): Promise<void> }>;
  close(): Promise<void>;
}

export interface Example {
  lifecycle: LifecycleCommand[];
  start: ToolExecutionStartCommand;
}

/**
 * A fresh scenario as `example` prints it (JSON), made in this process: for specs whose subject
 * is another command. The `example` specs and the walkthrough run the bin.
 */
export const exampleScenario = (): Example => JSON.parse(JSON.stringify(printedExample(cliExample()))) as Example;

const file = (value: unknown): string => {
  const path = join(freshDir('cli'), 'command.json');
  writeFileSync(path, Buffer.isBuffer(value) ? value : JSON.stringify(value, null, 2));
  return path;
};

/** The next attempt's start command after `lost -> ready`, built from what `history` shows. */
const retryOf = (start: ToolExecutionStartCommand, stepRun: { version: number; digest: string }): ToolExecutionStartCommand => {
  const suffix = `-retry-v${stepRun.version + 1}`;
  return {
    ...start,
    startId: start.startId + suffix,
    stepRun: { ...start.stepRun, expectedVersion: stepRun.version, expectedDigest: stepRun.digest },
    evidence: {
      traceId: start.evidence.traceId + suffix,
      spanId: start.evidence.spanId + suffix,
      auditEventId: start.evidence.auditEventId + suffix,
      auditReceiptId: start.evidence.auditReceiptId + suffix,
    },
    mutation: { ...start.mutation, mutationId: start.mutation.mutationId + suffix, runEventId: start.mutation.runEventId + suffix },
  };
};

export const cliSuite = (backend: CliBackend): void => {
  describe(`qinglong-barrier CLI (built bin, child processes): ${backend.name}`, function () {
    this.timeout(120_000);
    let db: CliDatabase;
    const cli = (args: readonly string[], stdin?: Buffer | string) => runCli([...db.args, ...args], stdin);
    before(() => buildOnce());
    beforeEach(async () => {
      db = await backend.open();
    });
    afterEach(() => db.close());

    const example = async (...flags: string[]): Promise<Example> => json<Example>(await runCli(['example', ...flags]));
    const applyAll = async (ex: Example) => json<unknown[]>(await cli(['apply', '--command', '-'], JSON.stringify(ex.lifecycle)));

    it('issue 5: example prints a valid scenario (lifecycle commands and the start command), fresh ids each call', async () => {
      const one = await example();
      const two = await example();
      expect(one.lifecycle.map((c) => decodeLifecycleCommand(c).type)).to.deep.equal(['CreateRun', 'CreateStepRun', 'MarkStepRunReady']);
      expect(decodeStartCommand(one.start).command.startId).to.equal(one.start.startId);
      expect(two.start.startId).to.not.equal(one.start.startId);
      expect(two.lifecycle[0]!.data.runId).to.not.equal(one.lifecycle[0]!.data.runId);
      const approval = await example('--approval');
      expect(approval.lifecycle[2]!.type).to.equal('AwaitStepRunApproval');
      expect(approval.start.mutation.fromStatus).to.equal('waiting_approval');
    });

    it('issue 5: the 3 a.m. walkthrough: apply, prepare, in-doubt, show, resolve lost, retry, history, verify (exit 0 throughout)', async () => {
      const ex = await example();
      const { runId, stepRunId } = ex.start.stepRun;
      expect(await applyAll(ex)).to.have.length(3);

      const created = json<{ outcome: string; barrier: { record: { startId: string }; barrierDigest: string } }>(await cli(['prepare', '--command', file(ex.start)]));
      expect(created.outcome).to.equal('created');
      const replay = json<typeof created>(await cli(['prepare', '--command', '-'], JSON.stringify(ex.start)));
      expect(replay).to.deep.equal({ ...created, outcome: 'existing' });

      const doubt = json<{ startId: string; attempt: number; age: string; ageMs: number; adapter: { id: string }; traceId: string }[]>(await cli(['in-doubt']));
      expect(doubt).to.have.length(1);
      expect(doubt[0]).to.include({ startId: ex.start.startId, attempt: 3, traceId: ex.start.evidence.traceId });
      expect(doubt[0]!.adapter.id).to.equal(ex.start.contracts.adapter.id);
      expect(doubt[0]!.age).to.match(/^\d+(ms|s)$/);
      expect(json<unknown[]>(await cli(['in-doubt', '--older-than', '1h']))).to.deep.equal([]);
      expect(json<unknown[]>(await cli(['in-doubt', '--older-than', '0s', '--run', runId]))).to.have.length(1);
      expect(json<unknown[]>(await cli(['in-doubt', '--run', runId, '--limit', '1']))).to.have.length(1);
      expect(json<unknown[]>(await cli(['in-doubt', '--project', 'another-project']))).to.deep.equal([]);

      const shown = json<{ barrier: unknown; outcome: unknown; inDoubt: boolean }>(await cli(['show', '--start-id', ex.start.startId]));
      expect(shown).to.deep.equal({ barrier: created.barrier, outcome: null, inDoubt: true, plan: { status: 'absent' } });
      expect(json(await cli(['show', '--attempt', runId, stepRunId, '3']))).to.deep.equal(shown);
      expect(json(await cli(['show', '--trace-id', ex.start.evidence.traceId]))).to.deep.equal(shown);
      expect(json(await cli(['show', '--audit-receipt-id', ex.start.evidence.auditReceiptId]))).to.deep.equal(shown);

      const resolved = json<{ status: string; outcome: { outcome: string; decidedBy: string; reason: string } }>(
        await cli(['resolve', ex.start.startId, 'lost', '--reason', 'no_trace_of_tool', '--by', 'oncall-ana']),
      );
      expect(resolved.status).to.equal('recorded');
      expect(resolved.outcome).to.include({ outcome: 'lost', decidedBy: 'oncall-ana', reason: 'no_trace_of_tool' });
      expect(json<{ status: string }>(await cli(['resolve', ex.start.startId, 'lost', '--reason', 'no_trace_of_tool'])).status).to.equal('existing');
      expect(json<unknown[]>(await cli(['in-doubt']))).to.deep.equal([]);

      // Retry: lost -> ready, then a new attempt at the new StepRun version (R4.4).
      json(await cli(['apply', '--command', '-'], JSON.stringify({ type: 'MarkStepRunReady', data: { runId, stepRunId, requestedAtMs: Date.now() } })));
      const before = json<{ stepRun: { version: number; digest: string; status: string } }>(await cli(['history', runId, stepRunId]));
      expect(before.stepRun).to.include({ status: 'ready', version: 5 });
      const retry = retryOf(ex.start, before.stepRun);
      expect(json<{ outcome: string }>(await cli(['prepare', '--command', file(retry)])).outcome).to.equal('created');
      const history = json<{ attempts: { attempt: number; outcome: { outcome: string; decidedBy: string } | null }[] }>(await cli(['history', runId, stepRunId]));
      expect(history.attempts.map((h) => [h.attempt, h.outcome?.outcome ?? null])).to.deep.equal([
        [3, 'lost'],
        [6, null],
      ]);
      const done = json<{ outcome: { decidedBy: string } }>(await cli(['resolve', retry.startId, 'completed', '--reason', 'checked_tool_log']));
      expect(done.outcome.decidedBy).to.equal('spec-operator'); // default --by: QINGLONG_OPERATOR

      const verify = await cli(['verify']);
      expect(verify.code).to.equal(0);
      expect(verify.stderr).to.match(/^verify: integrity 100% \(\d+ of \d+\), \d+ s$/m); // progress lines, no bar, without a terminal
      expect(JSON.parse(verify.stdout)).to.deep.include({ ok: true, problems: [] });
    });

    describe('exit codes', () => {
      it('exit 2 validation: invalid UTF-8, unknown or forbidden fields, bad arguments, unknown commands', async () => {
        const ex = exampleScenario();
        await applyAll(ex);
        const cases: [string, readonly string[], (Buffer | string)?][] = [
          ['invalid UTF-8 on stdin', ['prepare', '--command', '-'], Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d])],
          ['invalid UTF-8 in a file', ['prepare', '--command', file(Buffer.from([0x22, 0xc3, 0x28, 0x22]))]],
          ['not JSON', ['apply', '--command', '-'], '{"type":'],
          ['forbidden field (R1.5)', ['prepare', '--command', '-'], JSON.stringify({ ...ex.start, input: { cmd: 'x' } })],
          ['unknown lifecycle command', ['apply', '--command', '-'], JSON.stringify({ type: 'DeleteRun', data: {} })],
          ['missing --command', ['prepare']],
          ['unreadable command file', ['prepare', '--command', join(freshDir('cli'), 'missing.json')]],
          ['bad duration', ['in-doubt', '--older-than', '5 minutes']],
          ['bad limit', ['in-doubt', '--limit', 'ten']],
          ['limit over 10000', ['in-doubt', '--limit', '10001']],
          ['bad outcome', ['resolve', ex.start.startId, 'maybe', '--reason', 'worker_lost']],
          ['missing --reason', ['resolve', ex.start.startId, 'lost']],
          ['reason carrying a URL (R1.5)', ['resolve', ex.start.startId, 'lost', '--reason', 'see https://wiki.example/x']],
          ['bad attempt version', ['show', '--attempt', 'run', 'step', 'three']],
          ['two identities for show', ['show', '--start-id', 'a', '--trace-id', 'b']],
          ['unknown command', ['rewind']],
          ['unknown option', ['in-doubt', '--since', '5m']],
        ];
        for (const [what, args, stdin] of cases) {
          const r = await cli(args, stdin);
          expect(r.code, `${what}: ${r.stderr}`).to.equal(2);
          expect(r.stdout, what).to.equal('');
          expect(r.stderr, what).to.not.equal('');
        }
        const utf8 = await cli(['prepare', '--command', '-'], Buffer.from([0xff]));
        expect(utf8.stderr).to.contain('not valid UTF-8');
        expect(json<unknown[]>(await cli(['in-doubt']))).to.deep.equal([]); // nothing was written
      });

      it('exit 3 precondition: Run or StepRun not as expected, unknown start', async () => {
        const ex = exampleScenario();
        const missing = await cli(['prepare', '--command', '-'], JSON.stringify(ex.start));
        expect(missing.code).to.equal(3);
        expect(missing.stderr).to.contain('run_not_found');
        await applyAll(ex);
        expect((await cli(['apply', '--command', '-'], JSON.stringify(ex.lifecycle[0]))).code).to.equal(3); // run_exists
        expect((await cli(['prepare', '--command', '-'], JSON.stringify({ ...ex.start, stepRun: { ...ex.start.stepRun, expectedVersion: 1 } }))).code).to.equal(3);
        expect((await cli(['show', '--start-id', 'no-such-start'])).code).to.equal(3);
        expect((await cli(['resolve', 'no-such-start', 'lost', '--reason', 'worker_lost'])).code).to.equal(3);
        expect((await cli(['history', 'no-such-run', 'no-such-step'])).code).to.equal(3);
        // R11.1: inspect of a start the store never committed asks no adapter
        const registry = join(freshDir('cli-inspect'), 'adapters.json');
        writeFileSync(registry, '{}');
        const unknown = await cli(['inspect', 'no-such-start', '--adapters', registry]);
        expect(unknown.code, unknown.stderr).to.equal(3);
        expect(unknown.stderr).to.contain('start_not_found');
        expect(unknown.stdout).to.equal('');
      });

      it('exit 4 semantic conflict: drift under an existing identity, a second different outcome', async () => {
        const ex = exampleScenario();
        await applyAll(ex);
        json(await cli(['prepare', '--command', '-'], JSON.stringify(ex.start)));
        const drift = await cli(['prepare', '--command', '-'], JSON.stringify({ ...ex.start, admission: { ...ex.start.admission, timeoutMs: 31_000 } }));
        expect(drift.code).to.equal(4);
        expect(drift.stderr).to.contain('SEMANTIC_CONFLICT');
        json(await cli(['resolve', ex.start.startId, 'failed', '--reason', 'tool_failed']));
        expect((await cli(['resolve', ex.start.startId, 'completed', '--reason', 'checked_tool_log'])).code).to.equal(4);
      });

      it('exit 5 corrupt record: a damaged barrier row fails closed on show, and verify lists every bad record', async () => {
        const ex = exampleScenario();
        await applyAll(ex);
        json(await cli(['prepare', '--command', '-'], JSON.stringify(ex.start)));
        const healthy = exampleScenario();
        await applyAll(healthy);
        json(await cli(['prepare', '--command', '-'], JSON.stringify(healthy.start)));
        await db.corruptBarrier(ex.start.startId);
        const show = await cli(['show', '--start-id', ex.start.startId]);
        expect(show.code).to.equal(5);
        expect(show.stdout).to.equal('');
        expect(show.stderr).to.contain('CORRUPT_RECORD');
        expect((await cli(['in-doubt'])).code).to.equal(5);
        expect(json(await cli(['show', '--start-id', healthy.start.startId]))).to.have.property('inDoubt', true);
        const verify = await cli(['verify']);
        expect(verify.code).to.equal(5);
        const report = JSON.parse(verify.stdout) as { ok: boolean; problems: { kind: string; record: string; problem: string }[] };
        expect(report.ok).to.equal(false);
        expect(report.problems.map((p) => [p.kind, p.record])).to.deep.include(['barrier', ex.start.startId]);
        expect(report.problems.every((p) => !p.record.includes(healthy.start.startId))).to.equal(true);
        expect(verify.stderr).to.contain('bad record');
      });

      it('exit 6 concurrency or timeout: a start that cannot get its lock in time', async () => {
        const ex = exampleScenario();
        await applyAll(ex);
        const lock = await db.holdLock(ex.start.stepRun.runId);
        try {
          const r = await cli(['--lock-timeout', '300', 'prepare', '--command', '-'], JSON.stringify(ex.start));
          expect(r.code, r.stderr).to.equal(6);
          expect(r.stderr).to.contain('TRANSACTION_TIMEOUT');
        } finally {
          await lock.release();
        }
        expect(json<{ outcome: string }>(await cli(['prepare', '--command', '-'], JSON.stringify(ex.start))).outcome).to.equal('created');
      });

      it('exit 0 for help; exit 1 for anything else (no such database); R9.5 exit 7 for an unreachable server', async () => {
        const help = await runCli(['--help']);
        expect(help.code).to.equal(0);
        expect(help.stdout).to.contain('Exit codes');
        const none = await runCli(['--db', join(freshDir('cli'), 'absent.db'), 'in-doubt']);
        expect(none.code).to.equal(1);
        expect(none.stderr).to.contain('no database');
        const unreachable = await runCli(['--postgres', 'postgres://postgres@127.0.0.1:1/nowhere', 'in-doubt']);
        expect(unreachable.code).to.equal(7);
        expect(unreachable.stderr).to.contain('CONNECTION_FAILED');
        expect((await runCli(['in-doubt'], undefined)).code).to.equal(2); // no backend named at all
      });
    });

    it('issue 5 R6.1: verify draws a progress bar with its phase and an ETA only when stderr is a terminal', async function () {
      const script = spawnSync('script', ['--version'], { encoding: 'utf8' });
      if (script.status !== 0) this.skip(); // util-linux `script` gives the child a pseudo-terminal
      const ex = exampleScenario();
      await applyAll(ex);
      json(await cli(['prepare', '--command', '-'], JSON.stringify(ex.start)));
      const command = [process.execPath, CLI, ...db.args, 'verify'].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
      const tty = spawnSync('script', ['-qec', command, '/dev/null'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
      expect(tty.status, tty.stdout).to.equal(0);
      expect(tty.stdout).to.match(/verify barriers \+ facts +\[[█░]+\] \d+% \| ETA \S+/);
      expect(tty.stdout).to.match(/verify integrity +\[[█░]+\] 100% \| ETA \S+/);
      const piped = await cli(['verify']);
      expect(piped.stderr).not.to.match(/[█░]/);
      expect(piped.stderr.trim().split('\n').every((l) => /^verify: [a-z +]+ \d+% \(\d+ of \d+\), \d+ s$/.test(l)), piped.stderr).to.equal(true);
    });

    it('R6.1 verify reports progress to a non-terminal: a line per phase (or JSON lines with --progress json), none with --progress none; a bad mode is exit 2', async () => {
      const ex = exampleScenario();
      await applyAll(ex);
      json(await cli(['prepare', '--command', '-'], JSON.stringify(ex.start)));
      const lines = await cli(['verify']);
      expect(lines.code, lines.stderr).to.equal(0);
      const phases = lines.stderr.trim().split('\n').map((l) => /^verify: (.+) \d+%/.exec(l)?.[1]);
      expect(phases).to.include.members(['barriers + facts', 'event log', 'integrity']);
      const asJson = await cli(['verify', '--progress', 'json']);
      expect(asJson.code, asJson.stderr).to.equal(0);
      const events = asJson.stderr.trim().split('\n').map((l) => JSON.parse(l) as { verify: string; phase: string; done: number; total: number; percent: number; elapsedMs: number });
      expect(events.every((e) => e.verify === 'progress' && Number.isInteger(e.done) && Number.isInteger(e.total) && e.done <= e.total)).to.equal(true);
      expect(events[events.length - 1]).to.include({ phase: 'integrity', percent: 100 });
      expect(JSON.parse(asJson.stdout)).to.deep.include({ ok: true });
      expect((await cli(['verify', '--progress', 'none'])).stderr).to.equal('');
      const bad = await cli(['verify', '--progress', 'loud']);
      expect(bad.code).to.equal(2);
      expect(bad.stderr).to.contain('--progress').and.contain('expected one of auto, bar, lines, json, none');
    });
  });
};
