import { spawn, type ChildProcess } from 'node:child_process';

// Child processes that run TypeScript through tsx, speak in lines on stdout, and can be
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

export const spawnTsxWorker = (script: string, args: readonly string[], env: Record<string, string> = {}): Worker => {
  const child = spawn(process.execPath, ['--require', 'tsx/cjs', script, ...args], {
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
