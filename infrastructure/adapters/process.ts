import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { Identity, decodeOrThrow, type Ref } from '../../domain/codecs';
import { checkedProcessOptions } from './options';
import { admitTicket } from '../../application/execution';
import { unshareOnThisHost, type Containment } from './processTree';
import { boundedCapture } from './boundedCapture';
import { RETURNED_OUTPUT_BYTES, RETURNED_STDERR_BYTES, ValidationError, boundedText, outputDigestOf, type AdapterAnswer, type AdapterReport, type DriverClaim, type ExecutionTicket, type InspectAttempt, type InspectReport, type InvocationPlan, type ToolAdapter } from '../../domain';

// The process adapter (R11.4, R12.3): runs one command per start, with the start id in its
// environment (QL_START_ID) and the tool input on stdin, bounded by the barrier's timeout.
// Its stdout and stderr go back to the caller (bounded: ToolOutput), never to a record or the
// journal: after a crash the journal tells how the tool ended, not what it printed.
//
// What the tool gets of the runtime: nothing. Its environment is exactly `env` (named one by
// one in the configuration), QL_START_ID, and the runtime's PATH only when `inheritPath` says
// so: never PGPASSWORD, a database URL, a key file's path or a cloud key of the runtime.
//
// The timeout ends the whole process tree: the tool runs in a PID namespace of its own
// (processTree.ts), so a `setsid`, a daemon or a grandchild holding stdout dies with it, and
// `start` returns by the timeout plus PROCESS_KILL_GRACE_MS. Where no namespace can be made,
// the adapter does not declare `enforcesTimeout` and the saga refuses to run it (R11.3).
//
// A journal keyed by start id, written before the spawn and by the wrapper when the tool
// exits, lets `inspect` tell "never started" from "ran and exited N" even when the saga was
// killed meanwhile. It holds the journal's identity, start ids, a pid and exit statuses: never
// the tool's input or output. "Never started" is proven only against the claims of the
// attempt: every earlier driver named this journal in its claim (its driver id ends with the
// journal id), so it wrote its `.started` here before any spawn. An empty, replaced or foreign
// journal cannot prove it and answers `unknown`.

/** After the timeout's kill, how long `start` waits for the tree to be gone before giving up (outcome unknown). */
export const PROCESS_KILL_GRACE_MS = 2000;

export interface ProcessAdapterOptions {
  /** The reviewed adapter (R1.4.3) this configuration is. */
  readonly ref: Ref;
  readonly command: string;
  readonly args?: readonly string[];
  /** Directory of the journal (created with its identity if absent): durable, one per host, shared by every saga on it. */
  readonly journalDir: string;
  /** The tool's whole environment besides QL_START_ID (its own configuration, never the tool input or the runtime's). */
  readonly env?: Readonly<Record<string, string>>;
  /** Give the tool the runtime's PATH (default false: nothing of the runtime's environment). */
  readonly inheritPath?: boolean;
  /** Bytes of stdout digested at most; the rest is drained and counted (default 16 MiB). */
  readonly maxOutputBytes?: number;
  /**
   * How the tool's process tree is held to the timeout: `pid-namespace` (Linux, util-linux
   * unshare; refused where this host cannot make one) or `none` (its process group only: then
   * the adapter declares no `enforcesTimeout`). Default: a PID namespace when this host can make one.
   */
  readonly containment?: Containment;
}

const JOURNAL_SCHEMA = 'qinglong/process-journal@v1';
const IDENTITY_FILE = 'journal.json';

/** The journal files of one start. */
const journalOf = (dir: string, startId: string) => ({
  started: join(dir, `${startId}.started`),
  exit: join(dir, `${startId}.exit`),
});

/** Write a small file durably; `exclusive` refuses an existing one (the journal's dedupe). */
const writeDurable = (path: string, text: string, exclusive: boolean): boolean => {
  let fd: number;
  try {
    fd = openSync(path, exclusive ? 'wx' : 'w');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw e;
  }
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return true;
};

const fsyncDir = (dir: string): void => {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
};

const readText = (path: string): string | undefined => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
};

/** The journal's identity, or undefined when it has none (empty, lost, not a journal). */
export const journalIdOf = (journalDir: string): string | undefined => {
  const text = readText(join(journalDir, IDENTITY_FILE));
  if (text === undefined) return undefined;
  try {
    const j = JSON.parse(text) as { schema?: unknown; journalId?: unknown };
    return j.schema === JOURNAL_SCHEMA && typeof j.journalId === 'string' && Identity.is(j.journalId) ? j.journalId : undefined;
  } catch {
    return undefined;
  }
};

/** The journal's identity, made once (durably) for a new journal. */
const ensureJournal = (journalDir: string): string => {
  mkdirSync(journalDir, { recursive: true });
  const known = journalIdOf(journalDir);
  if (known !== undefined) return known;
  const journalId = `journal-${randomUUID().replace(/-/g, '')}`;
  if (!writeDurable(join(journalDir, IDENTITY_FILE), `${JSON.stringify({ schema: JOURNAL_SCHEMA, journalId })}\n`, true)) {
    const raced = journalIdOf(journalDir);
    if (raced !== undefined) return raced;
    throw new ValidationError('processAdapter options', [{ path: 'journalDir', reason: 'invalid_value', message: `${IDENTITY_FILE} in the journal is not a journal identity` }]);
  }
  fsyncDir(journalDir);
  return journalId;
};

/** A driver id that names the journal its driver writes to (the saga forms it so). */
export const claimNamesJournal = (claim: Pick<DriverClaim, 'driverId'>, journalId: string): boolean => claim.driverId.endsWith(`.${journalId}`);

interface StartedRecord {
  readonly journalId: string;
  readonly startId: string;
  readonly pid: number;
}

const startedRecordOf = (text: string | undefined): StartedRecord | undefined => {
  try {
    const r = JSON.parse(text ?? '') as Partial<StartedRecord>;
    return typeof r.journalId === 'string' && typeof r.startId === 'string' && Number.isSafeInteger(r.pid) ? (r as StartedRecord) : undefined;
  } catch {
    return undefined;
  }
};

/** The exit file says `<code>` (the wrapper), `timeout` or `killed:<signal>` (the adapter); complete once its line ends. */
const exitStatusOf = (text: string | undefined): { outcome: 'completed' | 'failed'; code: AdapterReport['code']; exitCode?: number } | undefined => {
  if (text === undefined || !text.endsWith('\n')) return undefined;
  const t = text.trim();
  if (/^\d+$/.test(t)) {
    const exitCode = Number(t);
    return exitCode === 0 ? { outcome: 'completed', code: 'tool_succeeded', exitCode } : { outcome: 'failed', code: 'tool_failed', exitCode };
  }
  if (t === 'timeout') return { outcome: 'failed', code: 'tool_timed_out' };
  if (/^killed:[A-Z0-9a-z]+$/.test(t)) return { outcome: 'failed', code: 'tool_killed' };
  return undefined;
};

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
};

// The wrapper records the tool's exit status itself, so the journal is complete even when the
// saga that spawned it is gone. "$0" is the exit file, "$@" the tool and its arguments: nothing
// is spliced, nothing is exported to the tool (the shell's own PWD is unset), and only shell
// builtins are used (no PATH).
const WRAPPER = 'unset PWD OLDPWD; f=$0; "$@"; c=$?; printf "%s\\n" "$c" > "$f"; exit $c';

/**
 * What the journal says of one start: read-only, so an operator can ask it from another
 * process. `attempt` is the start's claims so far; without it "never started" cannot be proven.
 */
export const inspectProcessJournal = async (journalDir: string, startIdInput: string, attempt?: InspectAttempt): Promise<InspectReport> => {
  const startId = decodeOrThrow(Identity, 'startId', startIdInput);
  const journalId = journalIdOf(journalDir);
  if (journalId === undefined) return { state: 'unknown' };
  const j = journalOf(journalDir, startId);
  const startedText = readText(j.started);
  if (startedText !== undefined) {
    const started = startedRecordOf(startedText);
    // A record of another journal or start: copied or replaced files prove nothing.
    if (started === undefined || started.journalId !== journalId || started.startId !== startId) return { state: 'unknown' };
    const exit = exitStatusOf(readText(j.exit));
    if (exit !== undefined) return { state: exit.outcome === 'completed' ? 'succeeded' : 'failed' };
    // Started with no exit recorded: still running, or killed with its wrapper (unknown).
    return { state: started.pid > 0 && alive(started.pid) ? 'running' : 'unknown' };
  }
  if (existsSync(j.exit)) return { state: 'unknown' };
  // No record of the start: "never started" only if every driver that could have spawned it wrote here first.
  const claims = attempt?.claims;
  if (claims === undefined || !claims.every((c) => claimNamesJournal(c, journalId))) return { state: 'unknown' };
  return { state: 'not_started' };
};

const killTree = (child: ChildProcess): void => {
  for (const target of [-child.pid!, child.pid!]) {
    try {
      process.kill(target, 'SIGKILL');
    } catch {
      // already gone
    }
  }
};

export const processAdapter = (input: ProcessAdapterOptions): ToolAdapter => {
  const options = checkedProcessOptions(input);
  const unshare = options.containment === 'none' ? null : unshareOnThisHost();
  if (options.containment === 'pid-namespace' && unshare === null) {
    throw new ValidationError('processAdapter options', [{ path: 'containment', reason: 'invalid_value', message: 'this host cannot make a PID namespace (util-linux unshare, Linux)' }]);
  }
  const journalId = ensureJournal(options.journalDir);
  const maxOutput = options.maxOutputBytes ?? 16 * 1024 * 1024;
  const inspect = async (ticket: ExecutionTicket, attempt?: InspectAttempt): Promise<InspectReport> =>
    inspectProcessJournal(options.journalDir, admitTicket(ticket, options.ref, 'inspect').startId, attempt);

  const environmentOf = (startId: string): Record<string, string> => {
    const env: Record<string, string> = {};
    if (options.inheritPath === true && typeof process.env.PATH === 'string') env.PATH = process.env.PATH;
    for (const [name, value] of Object.entries(options.env ?? {})) env[name] = value;
    env.QL_START_ID = startId;
    return env;
  };

  const start = async (ticket: ExecutionTicket, plan: InvocationPlan): Promise<AdapterReport | AdapterAnswer> => {
    // R12.1: a minted ticket and its opened plan, or nothing happens (no journal, no spawn).
    const context = admitTicket(ticket, options.ref, 'start', plan);
    const startId = decodeOrThrow(Identity, 'startId', context.barrier.startId);
    if (journalIdOf(options.journalDir) !== journalId) throw new Error(`the journal in ${options.journalDir} is no longer journal ${journalId}: nothing started`);
    const j = journalOf(options.journalDir, startId);
    const startedOf = (pid: number) => `${JSON.stringify({ journalId, startId, pid })}\n`;
    // The journal's dedupe: a start id runs its command at most once on this journal.
    if (!writeDurable(j.started, startedOf(0), true)) {
      const seen = await inspectProcessJournal(options.journalDir, startId);
      const s = exitStatusOf(readText(j.exit));
      if ((seen.state === 'succeeded' || seen.state === 'failed') && s !== undefined) return { outcome: s.outcome, code: s.code, ...outputDigestOf('') };
      throw new Error(`start ${startId} was already started by this journal and has no exit recorded (${seen.state})`);
    }
    const input = Buffer.from(JSON.stringify(plan.input ?? null), 'utf8');
    const argv = ['/bin/sh', '-c', WRAPPER, j.exit, options.command, ...(options.args ?? [])];
    return new Promise<AdapterAnswer>((resolve, reject) => {
      const child = spawn(unshare?.path ?? argv[0]!, unshare === null ? argv.slice(1) : [...unshare.flags, ...argv], {
        env: environmentOf(startId),
        stdio: ['pipe', 'pipe', 'pipe'],
        // Its own process group as well: what `none` contains, and the first thing killed.
        detached: true,
      });
      if (child.pid !== undefined) writeDurable(j.started, startedOf(child.pid), false);
      const [stdout, stderr] = [boundedCapture(child.stdout!, maxOutput), boundedCapture(child.stderr!, RETURNED_STDERR_BYTES)];
      let timedOut = false;
      let settled = false;
      const timers: NodeJS.Timeout[] = [];
      const settle = (f: () => void) => {
        if (settled) return;
        settled = true;
        for (const t of timers) clearTimeout(t);
        f();
      };
      // Past the grace the tree may still hold stdout: give up on it, the outcome is unknown.
      const giveUp = (why: string) =>
        settle(() => {
          killTree(child);
          child.stdout!.destroy();
          child.stderr!.destroy();
          reject(new Error(`start ${startId}: ${why} within ${PROCESS_KILL_GRACE_MS} ms: outcome unknown`));
        });
      timers.push(
        setTimeout(() => {
          timedOut = true;
          killTree(child);
          timers.push(setTimeout(() => giveUp('the tool\'s process tree did not end after its timeout'), PROCESS_KILL_GRACE_MS));
        }, context.timeoutMs),
      );
      // Without a namespace a grandchild may hold stdout after the tool exited: bounded too.
      child.on('exit', () => {
        if (!timedOut) timers.push(setTimeout(() => giveUp('the tool exited but its output stayed open'), PROCESS_KILL_GRACE_MS));
      });
      child.stdin!.on('error', () => undefined);
      child.stdin!.end(input);
      child.on('error', (e) => settle(() => reject(e)));
      child.on('close', (_code, signal) =>
        settle(() => {
          if (exitStatusOf(readText(j.exit)) === undefined) {
            // The wrapper was killed with the tool: the adapter records why, once.
            writeDurable(j.exit, `${timedOut ? 'timeout' : `killed:${signal ?? 'unknown'}`}\n`, false);
          }
          const s = exitStatusOf(readText(j.exit))!;
          const [kept, total] = [stdout.kept(), stdout.total()];
          const text = boundedText(kept, RETURNED_OUTPUT_BYTES);
          resolve({
            outcome: timedOut ? 'failed' : s.outcome,
            code: timedOut ? 'tool_timed_out' : s.code,
            outputDigest: outputDigestOf(kept).outputDigest,
            outputBytes: total,
            // for the caller only: the journal and the outcome fact never hold it
            output: { text: text.text, bytes: total, truncated: text.truncated || total > kept.byteLength, stderr: stderr.kept().toString('utf8'), stderrTruncated: stderr.total() > RETURNED_STDERR_BYTES },
          });
        }),
      );
    });
  };

  return {
    // Not idempotent: the journal dedupes a repeated start only while it is the journal the
    // claims name; an unprovable inspect must leave the attempt to recovery, never start again.
    declaration: { kind: 'process', ref: options.ref, guarantees: { idempotentStart: false, enforcesTimeout: unshare !== null }, journalId },
    start,
    inspect,
  };
};

/** Where the journal of one start lives (operators and specs read it; it holds no tool data). */
export const journalPathsOf = (journalDir: string, startId: string) => journalOf(journalDir, startId);
