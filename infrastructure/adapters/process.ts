import { spawn } from 'node:child_process';
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { Identity, decodeOrThrow, type Ref } from '../../domain/codecs';
import { checkedProcessOptions } from './options';
import { outputDigestOf, type AdapterReport, type ExecutionTicket, type InspectReport, type InvocationPlan, type ToolAdapter } from '../../domain';
import { admitTicket } from '../../application/execution';

// The process adapter (R11.4): runs one command per start, with the start id in its
// environment (QL_START_ID) and the tool input on stdin, bounded by the barrier's timeout. A
// journal keyed by start id, written before the spawn and by the process's own wrapper when it
// exits, lets `inspect` tell "never started" from "ran and exited N" even when the saga process
// was killed meanwhile. The journal holds the start id, a pid and an exit status: never the
// tool's input or output (only their digest and size leave this file, in the report).

export interface ProcessAdapterOptions {
  /** The reviewed adapter (R1.4.3) this configuration is. */
  readonly ref: Ref;
  readonly command: string;
  readonly args?: readonly string[];
  /** Directory of the journal (created if absent); one per host, shared by every saga on it. */
  readonly journalDir: string;
  /** Extra environment for the tool (its own configuration, never the tool input). */
  readonly env?: Readonly<Record<string, string>>;
  /** Bytes of stdout digested at most; the rest is drained and counted (default 16 MiB). */
  readonly maxOutputBytes?: number;
}

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

/** The exit file says `<code>` (the wrapper), `timeout` or `killed:<signal>` (the adapter). */
const exitStatusOf = (text: string): { outcome: 'completed' | 'failed'; code: AdapterReport['code']; exitCode?: number } => {
  const t = text.trim();
  if (/^\d+$/.test(t)) {
    const exitCode = Number(t);
    return exitCode === 0 ? { outcome: 'completed', code: 'tool_succeeded', exitCode } : { outcome: 'failed', code: 'tool_failed', exitCode };
  }
  if (t === 'timeout') return { outcome: 'failed', code: 'tool_timed_out' };
  return { outcome: 'failed', code: 'tool_killed' };
};

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
};

// The wrapper records the tool's exit status itself, so the journal is complete even when
// the saga that spawned it is gone. "$0" is the tool, "$@" its arguments; nothing is spliced.
const WRAPPER = '"$0" "$@"; c=$?; printf "%s" "$c" > "$QL_EXIT_FILE.tmp" && mv "$QL_EXIT_FILE.tmp" "$QL_EXIT_FILE"; exit $c';

/** What the journal says of one start: read-only, so an operator can ask it from another process. */
export const inspectProcessJournal = async (journalDir: string, startIdInput: string): Promise<InspectReport> => {
  const startId = decodeOrThrow(Identity, 'startId', startIdInput);
  const j = journalOf(journalDir, startId);
  if (existsSync(j.exit)) {
    const s = exitStatusOf(readFileSync(j.exit, 'utf8'));
    return { state: s.outcome === 'completed' ? 'succeeded' : 'failed' };
  }
  if (!existsSync(j.started)) return { state: 'not_started' };
  const pid = Number(readFileSync(j.started, 'utf8').trim());
  // Started with no exit recorded: still running, or killed with its wrapper (unknown).
  return { state: Number.isSafeInteger(pid) && pid > 0 && alive(pid) ? 'running' : 'unknown' };
};

export const processAdapter = (input: ProcessAdapterOptions): ToolAdapter => {
  const options = checkedProcessOptions(input);
  mkdirSync(options.journalDir, { recursive: true });
  const maxOutput = options.maxOutputBytes ?? 16 * 1024 * 1024;
  const inspect = async (ticket: ExecutionTicket): Promise<InspectReport> => inspectProcessJournal(options.journalDir, admitTicket(ticket, options.ref, 'inspect').startId);

  const start = async (ticket: ExecutionTicket, plan: InvocationPlan): Promise<AdapterReport> => {
    // R12.1: a minted ticket and its opened plan, or nothing happens (no journal, no spawn).
    const context = admitTicket(ticket, options.ref, 'start', plan);
    const startId = decodeOrThrow(Identity, 'startId', context.barrier.startId);
    const j = journalOf(options.journalDir, startId);
    // The journal's dedupe: a start id runs its command at most once on this host.
    if (!writeDurable(j.started, '0', true)) {
      const seen = await inspectProcessJournal(options.journalDir, startId);
      if (seen.state === 'succeeded' || seen.state === 'failed') {
        const s = exitStatusOf(readFileSync(j.exit, 'utf8'));
        return { outcome: s.outcome, code: s.code, ...outputDigestOf('') };
      }
      throw new Error(`start ${startId} was already started by this journal and has no exit recorded (${seen.state})`);
    }
    const input = Buffer.from(JSON.stringify(plan.input ?? null), 'utf8');
    return new Promise<AdapterReport>((resolve, reject) => {
      const child = spawn('/bin/sh', ['-c', WRAPPER, options.command, ...(options.args ?? [])], {
        env: { ...process.env, ...options.env, QL_START_ID: startId, QL_EXIT_FILE: j.exit },
        stdio: ['pipe', 'pipe', 'ignore'],
        // Its own process group: the timeout stops the tool and everything it spawned.
        detached: true,
      });
      if (child.pid !== undefined) writeDurable(j.started, String(child.pid), false);
      const chunks: Buffer[] = [];
      let kept = 0;
      let total = 0;
      child.stdout!.on('data', (b: Buffer) => {
        total += b.byteLength;
        if (kept < maxOutput) {
          const part = b.subarray(0, maxOutput - kept);
          chunks.push(part);
          kept += part.byteLength;
        }
      });
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          // already gone
        }
      }, context.timeoutMs);
      child.stdin!.on('error', () => undefined);
      child.stdin!.end(input);
      child.on('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      child.on('close', (_code, signal) => {
        clearTimeout(timer);
        if (!existsSync(j.exit)) {
          // The wrapper was killed with the tool: the adapter records why, once.
          writeDurable(j.exit, timedOut ? 'timeout' : `killed:${signal ?? 'unknown'}`, true);
        }
        const s = exitStatusOf(readFileSync(j.exit, 'utf8'));
        const out = outputDigestOf(Buffer.concat(chunks));
        resolve({ outcome: timedOut ? 'failed' : s.outcome, code: timedOut ? 'tool_timed_out' : s.code, outputDigest: out.outputDigest, outputBytes: total });
      });
    });
  };

  return {
    // Starts are idempotent by the journal: a second start of one id never spawns again.
    declaration: { kind: 'process', ref: options.ref, guarantees: { idempotentStart: true, enforcesTimeout: true } },
    start,
    inspect,
  };
};

/** Where the journal of one start lives (operators and specs read it; it holds no tool data). */
export const journalPathsOf = (journalDir: string, startId: string) => journalOf(journalDir, startId);
