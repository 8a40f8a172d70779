#!/usr/bin/env node
import { writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { Argument, Command, CommanderError } from 'commander';
import {
  PreconditionError,
  OUTCOME_REASON_CODES,
  START_OUTCOME_KINDS,
  ValidationError,
  decodeLifecycleCommand,
  decodeStartCommand,
  type OutcomeReasonCode,
  type StartOutcomeKind,
  type ToolExecutionStartCommand,
} from '../../domain';
import { Identity } from '../../domain/codecs';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { inspectEach, readAdapterRegistry, type AdapterRegistry } from './adapterRegistry';
import { openBackend, type BackendAccess, type BackendOptions } from './backend';
import { formatDuration, parseDuration } from './duration';
import { EXIT, exitCodeOf, openRefusedAsDamage } from './exitCodes';
import { readJsonInput } from './input';
import { exampleScenario, printedExample, writeExampleFiles } from './exampleFiles';
import { planRetry } from './retry';
import { PROGRESS_MODES, createVerifyProgressOutput } from './verifyBar';
import { addShowCommand, planShown, withPlans } from './showCommand';
import { addMigrateCommand } from './migrateCommand';
import { addCompactCommand } from './compactCommand';
import { refuseRepeatsAndExtras } from './oneMeaning';
import { describeError, secretsOfArgv } from './describeError';

// `qinglong-barrier`: the operator CLI. JSON on stdout, human errors on stderr, one
// exit code per error kind (exitCodes.ts). Every operation goes through the same authority
// surface the runtime uses; nothing here touches tables directly.

const NAME = 'qinglong-barrier';

const print = (value: unknown): void => {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
};

const defaultOperator = (): string => {
  const fromEnv = process.env.QINGLONG_OPERATOR;
  if (fromEnv !== undefined) return fromEnv;
  try {
    const name = userInfo().username;
    return Identity.is(name) ? name : 'operator';
  } catch {
    return 'operator';
  }
};

const positiveInt = (text: string, what: string): number => {
  if (!/^[1-9][0-9]{0,15}$/.test(text) || !Number.isSafeInteger(Number(text))) {
    throw new ValidationError('command line', [{ path: what, reason: 'invalid_value', message: `expected a positive whole number, got "${text}"` }]);
  }
  return Number(text);
};

const usage = (message: string): ValidationError => new ValidationError('command line', [{ path: '(arguments)', reason: 'invalid_value', message }]);

/** Open the backend, run `body`, always close (a PostgreSQL pool must not keep the process alive). */
const withAuthority = async <T>(program: Command, access: BackendAccess, body: (a: RecoverableStartBarrierAuthority) => Promise<T>): Promise<T> => {
  const authority = await openBackend(program.opts<BackendOptions>(), access);
  try {
    return await body(authority);
  } finally {
    await authority.close();
  }
};

/** The package's own version: the package refers to itself by name (its exports allow it). */
const VERSION = (require('@qinglong/start-barrier/package.json') as { version: string }).version;

export const buildProgram = (): Command => {
  const program: Command = new Command(NAME)
    .description('Inspect, drive and recover tool-execution start barriers (ADR-0158).')
    .version(VERSION, '-V, --version', 'print the version')
    .helpOption('-h, --help', 'show help')
    // Subcommand help lists --db, --postgres and the other global options too.
    .configureHelp({ showGlobalOptions: true })
    .option('--db <path>', 'SQLite database file: the default, embedded backend (env QINGLONG_BARRIER_DB)')
    .option('--postgres <url>', 'PostgreSQL connection string, schema ql3 (env QINGLONG_BARRIER_POSTGRES)')
    .option('--lock-timeout <ms>', 'how long to wait for a lock: SQLite busy timeout, PostgreSQL lock_timeout')
    .option('--no-migrate', 'PostgreSQL: do not apply migrations, only check the schema is current')
    .option('--plan-keyring <file>', 'plan key file: open sealed plans to check them (env QINGLONG_BARRIER_PLAN_KEYRING_FILE)')
    // No command: help on stderr and exit 2 (a script that forgot its command must not pass).
    .action(() => {
      const [unknown] = program.args;
      if (unknown !== undefined) program.error(`${NAME}: unknown command '${unknown}' (see --help)`);
      program.help({ error: true });
    })
    .exitOverride()
    .configureOutput({ writeOut: (s) => process.stdout.write(s), writeErr: (s) => process.stderr.write(s) })
    .showHelpAfterError('(run with --help for usage)')
    .addHelpText(
      'after',
      `
Exit codes: 0 ok, 2 validation, 3 precondition, 4 semantic conflict, 5 corrupt record,
            6 concurrency or timeout, 7 store unavailable, 1 anything else.
Keyed evidence: QINGLONG_BARRIER_KEYRING_FILE names the deployment key file (never an argument).
Sealed plans: --plan-keyring FILE or QINGLONG_BARRIER_PLAN_KEYRING_FILE (show, inspect, in-doubt, verify).`,
    );

  program
    .command('example')
    .description('print a valid scenario: lifecycle commands for a ready Tool StepRun and its start command (fresh ids)')
    .option('--approval', 'a StepRun waiting for an exact approval instead of a ready one')
    .option('--out <dir>', 'write DIR/lifecycle.json (for apply) and DIR/start.json (for prepare) instead of printing')
    .action((opts: { approval?: boolean; out?: string }) => {
      const s = exampleScenario(opts.approval === true);
      print(opts.out === undefined ? printedExample(s) : writeExampleFiles(opts.out, s));
    });

  program
    .command('apply')
    .description('run a lifecycle command (or a JSON array of them, in order)')
    .requiredOption('--command <file>', 'JSON file, or - for stdin')
    .action(async (opts: { command: string }) => {
      const input = await readJsonInput(opts.command, 'lifecycle command');
      const commands = Array.isArray(input) ? input : [input];
      if (commands.length === 0) throw usage('the array of lifecycle commands is empty');
      const decoded = commands.map((c) => decodeLifecycleCommand(c)); // all valid before any is applied
      await withAuthority(program, 'create', async (a) => {
        const results = [];
        for (const [i, command] of decoded.entries()) {
          try {
            results.push(await a.runs.handle(command));
          } catch (e) {
            if (decoded.length > 1) process.stderr.write(`${NAME}: applied ${i} of ${decoded.length} commands; command ${i} (${command.type}) failed\n`);
            throw e;
          }
        }
        print(Array.isArray(input) ? results : results[0]);
      });
    });

  program
    .command('prepare')
    .description('run a start (R3): prints { "outcome": "created" | "existing", "barrier": ... }')
    .requiredOption('--command <file>', 'JSON file, or - for stdin')
    .action(async (opts: { command: string }) => {
      const input = await readJsonInput(opts.command, 'start command');
      decodeStartCommand(input); // validation before any database is opened or created
      await withAuthority(program, 'create', async (a) => print(await a.barriers.prepare(input as ToolExecutionStartCommand)));
    });

  addShowCommand(program, (access, body) => withAuthority(program, access, body));

  program
    .command('history')
    .description('every attempt (barrier) of one StepRun, in order, with its outcome')
    .argument('<run>', 'Run id')
    .argument('<step>', 'StepRun id')
    .action(async (runId: string, stepRunId: string) => {
      await withAuthority(program, 'read', async (a) => {
        const attempts = await a.recovery.history(runId, stepRunId);
        const stepRun = await a.runs.getStepRun(runId, stepRunId);
        if (stepRun === null && attempts.length === 0) throw new PreconditionError('step_run_not_found', `StepRun ${stepRunId} does not exist in Run ${runId}`);
        print({ runId, stepRunId, stepRun, attempts });
      });
    });

  program
    .command('in-doubt')
    .description('starts committed with no outcome fact yet: their adapter may or may not have acted')
    .option('--older-than <duration>', 'only starts committed at least this long ago (database clock): 30s, 5m, 2h, 1d')
    .option('--project <id>', 'only this Project')
    .option('--run <id>', 'only this Run')
    .option('--limit <n>', 'at most this many, the oldest first (1..10000; default: all)')
    .option('--adapters <file>', 'the runtime\'s adapter registry (defineAdapters in a .mjs/.cjs/.js module, or its JSON): add what each adapter\'s inspect says')
    .action(async (opts: { olderThan?: string; project?: string; run?: string; limit?: string; adapters?: string }) => {
      const query = {
        ...(opts.olderThan === undefined ? {} : { olderThanMs: parseDuration(opts.olderThan) }),
        ...(opts.project === undefined ? {} : { projectId: opts.project }),
        ...(opts.run === undefined ? {} : { runId: opts.run }),
        // the recovery API bounds it (1..10000) with a typed error; here only the digits
        ...(opts.limit === undefined ? {} : { limit: positiveInt(opts.limit, '--limit') }),
      };
      const registry = opts.adapters === undefined ? undefined : await readAdapterRegistry(opts.adapters);
      await withAuthority(program, 'read', async (a) => {
        const listed = await withPlans(a, (await a.recovery.inDoubt(query)).map((s) => ({ ...s, age: formatDuration(s.ageMs) })));
        print(registry === undefined ? listed : (await inspectEach(a, registry, listed)).map((inspect, i) => ({ ...listed[i]!, inspect })));
      });
    });

  program
    .command('inspect')
    .description("ask a start's adapter what its tool knows (not_started, running, succeeded, failed, unknown); records nothing")
    .argument('<startId>', 'the start to inspect')
    .requiredOption('--adapters <file>', 'the runtime\'s adapter registry (defineAdapters in a .mjs/.cjs/.js module, or its JSON): how to reach each reviewed adapter\'s inspect')
    .action(async (startId: string, opts: { adapters: string }) => {
      const registry: AdapterRegistry = await readAdapterRegistry(opts.adapters);
      await withAuthority(program, 'read', async (a) => {
        const barrier = await a.barriers.getByStartId(startId);
        if (barrier === null) throw new PreconditionError('start_not_found', `no start barrier has startId ${startId}`);
        const outcome = await a.recovery.outcome(startId);
        print({ startId, adapter: barrier.record.contracts.adapter, inDoubt: outcome === null, outcome, ...(await planShown(a, startId)), inspect: (await inspectEach(a, registry, [{ startId }]))[0] });
      });
    });

  program
    .command('resolve')
    .description('record the outcome of an in-doubt start as a new fact (lost then allows a retry at a new version)')
    .argument('<start-id>', 'the start to resolve')
    .addArgument(new Argument('<outcome>', 'what happened').choices(START_OUTCOME_KINDS))
    .requiredOption('--reason <code>', `why, as a code kept with the fact (R10.2): ${OUTCOME_REASON_CODES.join(', ')}`)
    .option('--ticket <ref>', 'your ticket, PROJECT-NUMBER (e.g. OPS-1234)')
    .option('--note <text>', 'free text for people: kept apart from the evidence (only its digest is bound) and purgeable')
    .option('--by <who>', 'who decided (default: QINGLONG_OPERATOR or your user name)')
    .option('--outcome-digest <digest>', 'digest of the tool outcome, for completed or failed')
    .action(async (startId: string, outcome: StartOutcomeKind, opts: { reason: string; ticket?: string; note?: string; by?: string; outcomeDigest?: string }) => {
      await withAuthority(program, 'write', async (a) => {
        print(
          await a.recovery.resolve(startId, outcome, {
            decidedBy: opts.by ?? defaultOperator(),
            reason: opts.reason as OutcomeReasonCode, // checked by resolve: VALIDATION_FAILED naming it
            ...(opts.ticket === undefined ? {} : { ticket: opts.ticket }),
            ...(opts.note === undefined ? {} : { note: opts.note }),
            ...(opts.outcomeDigest === undefined ? {} : { outcomeDigest: opts.outcomeDigest }),
          }),
        );
      });
    });

  program
    .command('note')
    .description('the resolution note an outcome binds (R10.2): its text, or "purged"')
    .argument('<start-id>', 'the resolved start')
    .action(async (startId: string) => {
      await withAuthority(program, 'read', async (a) => print(await a.recovery.note(startId)));
    });

  program
    .command('purge-note')
    .description('erase a resolution note for good; its digest stays bound and verify stays green (R10.2)')
    .argument('<start-id>', 'the resolved start')
    .action(async (startId: string) => {
      await withAuthority(program, 'write', async (a) => print(await a.recovery.purgeNote(startId)));
    });

  addMigrateCommand(program);
  addCompactCommand(program);

  program
    .command('retry')
    .description('after a lost attempt: mark the StepRun ready (if lost) and print the next attempt\'s start command, for prepare')
    .argument('<run>', 'Run id')
    .argument('<step>', 'StepRun id')
    .option('--out <file>', 'also write the start command to FILE (then: prepare --command FILE)')
    .action(async (runId: string, stepRunId: string, opts: { out?: string }) => {
      await withAuthority(program, 'write', async (a) => {
        const retry = await planRetry(a, runId, stepRunId, Date.now());
        if (opts.out !== undefined) writeFileSync(opts.out, `${JSON.stringify(retry.command, null, 2)}\n`);
        if (retry.markedReady) process.stderr.write(`${NAME}: StepRun ${stepRunId} moved lost -> ready (version ${retry.stepRun.version})\n`);
        print(retry.command);
      });
    });

  program
    .command('verify')
    .description('re-verify every stored barrier and its facts; exit 5 and list every bad record on any damage')
    .option('--progress <mode>', `progress on stderr: ${PROGRESS_MODES.join(', ')} (auto: a bar on a terminal, lines elsewhere; json: JSON lines)`, 'auto')
    .action(async (opts: { progress: string }) => {
      const bar = createVerifyProgressOutput(process.stderr, opts.progress);
      await withAuthority(program, 'read', async (a) => {
        const report = await a.recovery.verify(bar === undefined ? {} : { onProgress: bar.onProgress }).finally(() => bar?.stop());
        print(report);
        if (report.warnings.length > 0) process.stderr.write(`${NAME}: ${report.warnings.length} warning(s), listed on stdout (not damage)\n`);
        if (!report.ok) {
          process.stderr.write(`${NAME}: CORRUPT_RECORD: ${report.problems.length} bad record(s), listed on stdout\n`);
          process.exitCode = EXIT.corrupt;
        }
      }).catch((e: unknown) => {
        const problem = openRefusedAsDamage(e);
        if (problem === undefined) throw e;
        print({ ok: false, problems: [{ kind: 'schema', record: 'schema', problem }] });
        process.stderr.write(`${NAME}: CORRUPT_RECORD: ${problem}\n`);
        process.exitCode = EXIT.corrupt;
      });
    });
  return refuseRepeatsAndExtras(program);
};

export const main = async (argv: readonly string[]): Promise<number> => {
  const program = buildProgram();
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return typeof process.exitCode === 'number' ? process.exitCode : EXIT.ok;
  } catch (e) {
    const code = exitCodeOf(e);
    // Commander already printed its own message (and help) for a bad command line.
    if (!(e instanceof CommanderError)) process.stderr.write(`${NAME}: ${describeError(e, secretsOfArgv(argv))}\n`);
    return code;
  }
};

if (require.main === module) {
  // A reader that stops early (`| head`) is not an error of ours.
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code !== 'EPIPE') throw e;
    process.exit(typeof process.exitCode === 'number' ? process.exitCode : EXIT.ok);
  });
  void main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
