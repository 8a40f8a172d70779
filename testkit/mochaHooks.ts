import { randomBytes } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { runAfterRun } from './afterRun';

// Loaded by .mocharc.json. The run is named once, in mocha's own process, before any spec
// file loads (SB_TEST_RUN): parallel workers and the child processes of specs inherit the name,
// so the PostgreSQL harness shares one migrated template across them and every database the
// run makes carries it (testkit/postgresHarness.ts).
export const mochaGlobalSetup = (): void => {
  process.env.SB_TEST_RUN ??= randomBytes(4).toString('hex');
};

// After the last spec of every worker: the run's databases, found by name, whatever made them.
// The harness is loaded only when the run used the server, so the unit tier never connects.
export const mochaGlobalTeardown = async (): Promise<void> => {
  const run = process.env.SB_TEST_RUN;
  if (run === undefined) return;
  // required here, not imported above: a run that never used the server never loads pg
  const { dropRunDatabases, runMarker } = require('./postgresHarness') as typeof import('./postgresHarness');
  if (!existsSync(runMarker(run))) return;
  await dropRunDatabases(run);
  rmSync(runMarker(run), { force: true });
};

// Under scripts/test.mjs (SB_TEST_TIMES names a file): each spec file's own time, one JSON line
// per file, so the int and soak tiers that share one pool still print their times.
let fileStarted = 0;
let cpuStarted: Cpu | undefined;

interface Cpu {
  readonly own: number;
  readonly children: number;
}

// CPU seconds of this worker and of the child processes it has reaped (CLI runs, soak runners),
// from /proc/self/stat: what a file costs the machine, which its wall time in a pool hides.
// PostgreSQL's backends are not children, so their time is not in either figure. Undefined
// where there is no /proc: the line then has no cpuMs, rather than a zero.
const cpuNow = (): Cpu | undefined => {
  try {
    const fields = readFileSync('/proc/self/stat', 'utf8').replace(/^.*\) /, '').split(' ');
    const tick = (i: number): number => Number(fields[i - 3]) * 10; // 100 ticks per second
    return { own: tick(14) + tick(15), children: tick(16) + tick(17) };
  } catch {
    return undefined;
  }
};
function recordFileTime(this: Mocha.Context): void {
  const out = process.env.SB_TEST_TIMES;
  if (out === undefined || out === '') return;
  const root = this.test?.parent;
  const files = [...new Set([...(root?.suites ?? []), ...(root?.tests ?? [])].map((r) => r.file))];
  const [cpu, started] = [cpuNow(), cpuStarted];
  const cpuMs = cpu === undefined || started === undefined ? undefined : { own: cpu.own - started.own, children: cpu.children - started.children };
  appendFileSync(out, `${JSON.stringify({ files, ms: Date.now() - fileStarted, ...(cpuMs === undefined ? {} : { cpuMs }) })}\n`);
}

// Root hooks: a process's own clean-ups (SQLite templates and the like) after its specs; in
// parallel mode mocha runs them around each file.
export const mochaHooks = {
  beforeAll: (): void => {
    fileStarted = Date.now();
    cpuStarted = cpuNow();
  },
  afterAll: [runAfterRun, recordFileTime],
};
