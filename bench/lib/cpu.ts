import { readdirSync, readFileSync } from 'node:fs';

// CPU time, so every figure says which side was busy. Client: this process (getrusage through
// process.cpuUsage). Server: the PostgreSQL backends serving the bench's own databases
// (`sbbench_*`, recognised by their process title) plus the server's shared writers (WAL
// writer, checkpointer, background writer), read from /proc. Backends of other databases on
// the shared server are left out, so other people's work does not land in our figures.

const TICK_MS = 1000 / 100; // USER_HZ is 100 on Linux
const SHARED = /: (walwriter|checkpointer|background writer)\s*$/;

const read = (path: string): string | undefined => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
};

const ticksOf = (pid: string): number | undefined => {
  const text = read(`/proc/${pid}/stat`);
  if (text === undefined) return undefined;
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return Number(f[11]) + Number(f[12]);
};

/** CPU ms so far of every server process that counts for us, by pid (only these databases' backends, when given). */
const ourServerProcesses = (databases?: readonly string[]): Map<string, number> => {
  const out = new Map<string, number>();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const title = read(`/proc/${pid}/cmdline`);
    if (title === undefined || !title.startsWith('postgres')) continue;
    const clean = title.replace(/\0/g, ' ').trim();
    if (databases !== undefined ? !databases.some((d) => clean.includes(` ${d} `)) : !clean.includes('sbbench_') && !SHARED.test(clean)) continue;
    const ticks = ticksOf(pid);
    if (ticks !== undefined) out.set(pid, ticks * TICK_MS);
  }
  return out;
};

/**
 * Server CPU over an interval. Polling (for pgbench, whose connections come and go inside
 * the interval) keeps the last value seen of each backend; a backend first seen after the
 * start counts from zero.
 */
export class ServerCpu {
  private readonly first: Map<string, number>;
  private readonly last = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    pollMs?: number,
    private readonly databases?: readonly string[],
  ) {
    this.first = ourServerProcesses(databases);
    if (pollMs !== undefined) this.timer = setInterval(() => this.poll(), pollMs);
  }

  private poll(): void {
    for (const [pid, ms] of ourServerProcesses(this.databases)) this.last.set(pid, ms);
  }

  stop(): number {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.poll();
    let total = 0;
    for (const [pid, ms] of this.last) total += ms - (this.first.get(pid) ?? 0);
    return total;
  }
}

export const clientCpuMs = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
