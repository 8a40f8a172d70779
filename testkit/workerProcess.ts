import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

// Child processes that run TypeScript (through tsx, or compiled: nodeArgsOf), speak in lines on stdout, and can be
// SIGKILLed by their pid. Used by the crash soak and by the SQLite crash spec.

export interface WorkerExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface Worker {
  readonly child: ChildProcess;
  /** Every stdout line so far, in order. */
  readonly lines: string[];
  /** Resolves at the first line equal to `line` (rejects if the process exits first). */
  waitFor(line: string): Promise<void>;
  readonly exited: Promise<WorkerExit>;
  stderr(): string;
  /** Write one line to the child's stdin. */
  send(line: string): void;
  /** SIGKILL this child (by its own pid; never a process group or a name). */
  kill(): void;
}

// The repository's root, whether this file runs from its source or from tsc's output in bench-results/build.
const BUILD = `${sep}bench-results${sep}build${sep}`;
const REPO = __dirname.includes(BUILD) ? __dirname.slice(0, __dirname.indexOf(BUILD)) : join(__dirname, '..');

/**
 * Node's arguments to run one of this repository's TypeScript scripts: through tsx, or under
 * `npm test` (SB_PREBUILT=1: scripts/test.mjs has just compiled every source into
 * bench-results/build) its compiled twin with plain node, which starts in a fraction of tsx's
 * time. A script inside that build (code that itself runs compiled) runs as its .js.
 */
export const nodeArgsOf = (script: string): string[] => {
  if (script.endsWith('.ts')) {
    const js = script.replace(/\.ts$/, '.js');
    if (!existsSync(script) && existsSync(js)) return [js];
    const path = relative(REPO, script);
    const twin = join(REPO, 'bench-results', 'build', path.replace(/\.ts$/, '.js'));
    if (process.env.SB_PREBUILT === '1' && !path.startsWith('..') && existsSync(twin)) return [twin];
  }
  return ['--require', 'tsx/cjs', script];
};

export const spawnTsxWorker = (script: string, args: readonly string[], env: Record<string, string> = {}): Worker => {
  const child = spawn(process.execPath, [...nodeArgsOf(script), ...args], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const waiters: { line: string; resolve: () => void; reject: (e: Error) => void }[] = [];
  let partial = '';
  let err = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    partial += chunk.toString('utf8');
    let i: number;
    while ((i = partial.indexOf('\n')) >= 0) {
      const line = partial.slice(0, i);
      partial = partial.slice(i + 1);
      lines.push(line);
      for (const w of waiters.filter((w) => w.line === line)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  });
  child.stdin!.on('error', () => undefined); // a killed child closes its end
  child.stderr!.on('data', (chunk: Buffer) => {
    if (err.length < 100_000) err += chunk.toString('utf8');
  });
  const exited = new Promise<WorkerExit>((resolve) => {
    child.on('error', (e) => {
      err += String(e);
      resolve({ code: -1, signal: null });
    });
    child.on('close', (code, signal) => {
      // A line cut short by the kill is not a line: the child never finished writing it.
      for (const w of waiters.splice(0)) w.reject(new Error(`worker exited (${signal ?? code}) before "${w.line}": ${err.slice(0, 2000)}`));
      resolve({ code, signal });
    });
  });
  return {
    child,
    lines,
    exited,
    stderr: () => err,
    waitFor: (line) =>
      lines.includes(line)
        ? Promise.resolve()
        : new Promise<void>((resolve, reject) => {
            waiters.push({ line, resolve, reject });
          }),
    send: (line) => {
      if (child.exitCode === null && child.signalCode === null) child.stdin!.write(`${line}\n`);
    },
    kill: () => {
      if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
};
