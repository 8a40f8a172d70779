import { execFileSync, spawn } from 'node:child_process';
import { appendFileSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';

// PostgreSQL 15 nodes made by the harness itself: initdb into a temporary folder, its own port
// on 127.0.0.1 (never 5432), its own socket folder, run as the `postgres` OS user (through
// runuser when the harness runs as root). Every node records the postmaster pid it started, so
// cleanup ends exactly those processes, by pid, and removes the folders, whatever happened.

export const PG_BIN = process.env.RELIABILITY_PG_BIN ?? '/usr/lib/postgresql/15/bin';
const HOST = '127.0.0.1';

interface PostgresUser {
  readonly uid: number;
  readonly gid: number;
}
const isRoot = (): boolean => typeof process.getuid === 'function' && process.getuid() === 0;
let pgUser: PostgresUser | undefined;
const postgresUser = (): PostgresUser => {
  pgUser ??= {
    uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim()),
    gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim()),
  };
  return pgUser;
};

export interface RunResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Run a PostgreSQL program as the postgres user, bounded in time; never through a shell. */
export const runPg = (program: string, args: readonly string[], timeoutMs = 60_000): Promise<RunResult> =>
  new Promise((resolve) => {
    const bin = join(PG_BIN, program);
    const [cmd, argv] = isRoot() ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, [...args]];
    const child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C', PGAPPNAME: 'reliability' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      resolve({ code: -1, stdout, stderr: stderr + String(e) });
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });

const mustRun = async (program: string, args: readonly string[], timeoutMs?: number): Promise<RunResult> => {
  const r = await runPg(program, args, timeoutMs);
  if (r.code !== 0) throw new Error(`${program} ${args.join(' ')} failed (${r.code}): ${r.stderr.slice(-2000)}${r.stdout.slice(-500)}`);
  return r;
};

/** A free port on 127.0.0.1, preferring the given one. */
export const freePort = async (preferred?: number): Promise<number> => {
  const tryPort = (port: number) =>
    new Promise<number | undefined>((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(undefined));
      server.listen(port, HOST, () => {
        const address = server.address();
        server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : undefined));
      });
    });
  if (preferred !== undefined) {
    const p = await tryPort(preferred);
    if (p !== undefined) return p;
  }
  const p = await tryPort(0);
  if (p === undefined || p === 5432) throw new Error('no free port on 127.0.0.1');
  return p;
};

/** Every node and folder made in this process, ended and removed even if the process dies. */
const live = { nodes: new Set<PgNode>(), bases: new Set<string>() };
let guarded = false;
const cleanupEverything = (): void => {
  for (const n of live.nodes) n.forceStop();
  for (const b of live.bases) rmSync(b, { recursive: true, force: true });
  live.nodes.clear();
  live.bases.clear();
};
const guard = (): void => {
  if (guarded) return;
  guarded = true;
  process.on('exit', cleanupEverything);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      cleanupEverything();
      process.kill(process.pid, signal);
    });
  }
};

/** A temporary folder the postgres user owns. */
export const makeBase = (label: string): string => {
  guard();
  const dir = mkdtempSync(join(tmpdir(), `${label}-`));
  live.bases.add(dir);
  if (isRoot()) chownSync(dir, postgresUser().uid, postgresUser().gid);
  return dir;
};

/** Write (or append to) a file in a data folder, owned by postgres so its tools can rewrite it. */
export const writePgFile = (path: string, content: string, append = false): void => {
  if (append) appendFileSync(path, content);
  else writeFileSync(path, content);
  if (isRoot()) chownSync(path, postgresUser().uid, postgresUser().gid);
};

export class PgNode {
  /** Postmaster pids this node has had, for a cleanup by pid. */
  readonly pids = new Set<number>();

  constructor(
    readonly name: string,
    readonly dir: string,
    readonly port: number,
  ) {
    live.nodes.add(this);
  }

  get log(): string {
    return `${this.dir}.log`;
  }

  /** Its socket folder, beside the data folder (inside it, pg_rewind would try to copy the socket). */
  get socketDir(): string {
    return `${this.dir}.sock`;
  }

  url(database = 'postgres'): string {
    return `postgres://postgres@${HOST}:${this.port}/${database}`;
  }

  /** The settings that make this folder this node: its port, its socket folder, loopback only. */
  ownSettings(extra: Record<string, string> = {}): void {
    if (!existsSync(this.socketDir)) {
      mkdirSync(this.socketDir);
      if (isRoot()) chownSync(this.socketDir, postgresUser().uid, postgresUser().gid);
    }
    const lines = { listen_addresses: HOST, port: String(this.port), unix_socket_directories: this.socketDir, ...extra };
    writePgFile(join(this.dir, 'postgresql.auto.conf'), `\n${Object.entries(lines).map(([k, v]) => `${k} = '${v.replace(/'/g, "''")}'`).join('\n')}\n`, true);
  }

  async initdb(): Promise<void> {
    await mustRun('initdb', ['-D', this.dir, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--no-instructions', '--no-sync']);
  }

  postmasterPid(): number | undefined {
    const file = join(this.dir, 'postmaster.pid');
    if (!existsSync(file)) return undefined;
    const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  }

  /** pg_ctl start; with `wait`, until it accepts connections (a standby: read-only ones). */
  async start(wait = true, timeoutS = 60): Promise<RunResult> {
    const r = await runPg('pg_ctl', ['-D', this.dir, '-l', this.log, ...(wait ? ['-w', '-t', String(timeoutS)] : ['-W']), 'start'], (timeoutS + 10) * 1000);
    const pid = await this.waitForPid(10_000);
    if (pid !== undefined) this.pids.add(pid);
    if (wait && r.code !== 0) throw new Error(`${this.name} did not start (${r.code}): ${r.stderr}\n${this.tailLog()}`);
    return r;
  }

  private async waitForPid(ms: number): Promise<number | undefined> {
    const deadline = Date.now() + ms;
    for (;;) {
      const pid = this.postmasterPid();
      if (pid !== undefined || Date.now() > deadline) return pid;
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async stop(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    if (this.postmasterPid() === undefined) return;
    await runPg('pg_ctl', ['-D', this.dir, '-m', mode, '-w', '-t', '60', 'stop'], 70_000);
  }

  /** SIGKILL the postmaster (a crash, not a shutdown), then wait for its children to go. */
  async killPostmaster(): Promise<number> {
    const pid = this.postmasterPid();
    if (pid === undefined) throw new Error(`${this.name} has no postmaster to kill`);
    const children = childrenOf(pid);
    process.kill(pid, 'SIGKILL');
    // Backends notice their postmaster died and exit; any that do not are ended by pid.
    const deadline = Date.now() + 10_000;
    while ([pid, ...children].some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    for (const c of children) if (alive(c)) process.kill(c, 'SIGKILL');
    return pid;
  }

  async query<T extends Record<string, unknown>>(sql: string, params: unknown[] = [], database = 'postgres'): Promise<T[]> {
    const c = new Client({ connectionString: this.url(database), connectionTimeoutMillis: 5000, statement_timeout: 30_000 });
    c.on('error', () => undefined);
    await c.connect();
    try {
      return (await c.query<T>(sql, params)).rows;
    } finally {
      await c.end().catch(() => undefined);
    }
  }

  /** Poll `check` until it holds (bounded). */
  async until(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last: unknown;
    for (;;) {
      try {
        if (await check()) return;
      } catch (e) {
        last = e;
      }
      if (Date.now() > deadline) throw new Error(`${this.name}: timed out waiting for ${what}${last ? ` (${String(last)})` : ''}\n${this.tailLog()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** The timeline this node writes (or replays) on. */
  async timeline(): Promise<number> {
    const [row] = await this.query<{ tli: string }>(
      "SELECT CASE WHEN pg_is_in_recovery() THEN (SELECT received_tli::text FROM pg_stat_wal_receiver) ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END AS tli",
    );
    return row?.tli === undefined || row.tli === null ? 0 : /^[0-9A-F]{8}$/.test(row.tli) ? parseInt(row.tli, 16) : Number(row.tli);
  }

  tailLog(lines = 30): string {
    try {
      return readFileSync(this.log, 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  }

  /** End every postmaster this node started, by pid, and anything left under it. */
  forceStop(): void {
    for (const pid of [...this.pids, this.postmasterPid()].filter((p): p is number => p !== undefined)) {
      for (const c of childrenOf(pid)) if (alive(c)) process.kill(c, 'SIGKILL');
      if (alive(pid) && isOurPostmaster(pid, this.dir)) process.kill(pid, 'SIGKILL');
    }
  }
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Direct children of a pid, from /proc (the postmaster's backends and auxiliary processes). */
const childrenOf = (pid: number): number[] => {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
};

/** A recorded pid is only ours while its command line still names our data folder. */
const isOurPostmaster = (pid: number, dir: string): boolean => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dir);
  } catch {
    return false;
  }
};

/** Remove the whole base folder (clusters, logs) after every node is down. */
export const removeBase = (base: string, nodes: readonly PgNode[]): void => {
  for (const n of nodes) {
    n.forceStop();
    live.nodes.delete(n);
  }
  rmSync(base, { recursive: true, force: true });
  live.bases.delete(base);
};
