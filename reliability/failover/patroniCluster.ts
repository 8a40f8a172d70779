import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { accessSync, chownSync, closeSync, constants, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';

// The reference HA cluster (R13.2), made and removed by the harness: one etcd, three Patroni
// nodes running PostgreSQL 15 (synchronous_mode and synchronous_mode_strict), and HAProxy in
// front routing to whichever node answers Patroni's `GET /primary`. Everything listens on
// 127.0.0.1 on kernel-chosen ports and lives in one temporary folder. Patroni and PostgreSQL run
// as the `postgres` OS user (the harness usually runs as root). Every process the harness starts
// is recorded by pid, and every postmaster by its data folder, so cleanup ends exactly those,
// and removes the folder, whatever happened (failure, SIGINT, exit).

export const PG_BIN = process.env.RELIABILITY_PG_BIN ?? '/usr/lib/postgresql/15/bin';
const HOST = '127.0.0.1';
export const SCOPE = 'ql3-reliability';

const isRoot = (): boolean => typeof process.getuid === 'function' && process.getuid() === 0;
let pgUser: { readonly uid: number; readonly gid: number } | undefined;
const postgresUser = (): { readonly uid: number; readonly gid: number } => {
  pgUser ??= {
    uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim()),
    gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim()),
  };
  return pgUser;
};
const own = (path: string): void => {
  if (isRoot()) chownSync(path, postgresUser().uid, postgresUser().gid);
};

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A free port on 127.0.0.1 chosen by the kernel (never 5432, the specs' server). */
export const freePort = async (): Promise<number> => {
  for (let i = 0; i < 20; i++) {
    const port = await new Promise<number | undefined>((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(undefined));
      server.listen(0, HOST, () => {
        const address = server.address();
        server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : undefined));
      });
    });
    if (port !== undefined && port !== 5432) return port;
  }
  throw new Error('no free port on 127.0.0.1');
};

/** Running, not a zombie (a double-forked postmaster may be reaped late, or never, here). */
export const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0] !== 'Z';
  } catch {
    return false;
  }
};

const killPid = (pid: number, signal: NodeJS.Signals = 'SIGKILL'): void => {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
};

/** Direct children of a pid, from /proc (a postmaster's backends and auxiliary processes). */
const childrenOf = (pid: number): number[] => {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
};

const cmdlineOf = (pid: number): string => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
};

/** The postmaster of a data folder, only while that pid's command line still names the folder. */
export const postmasterOf = (dataDir: string): number | undefined => {
  try {
    const pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isSafeInteger(pid) && pid > 0 && alive(pid) && cmdlineOf(pid).includes(dataDir) ? pid : undefined;
  } catch {
    return undefined;
  }
};

/** SIGKILL a postmaster (a crash, not a shutdown); backends that outlive it are ended by pid. */
export const killPostmaster = async (pid: number, waitMs = 5000): Promise<void> => {
  const children = childrenOf(pid);
  killPid(pid);
  const deadline = Date.now() + waitMs;
  while ([pid, ...children].some(alive) && Date.now() < deadline) await sleep(25);
  for (const c of children) if (alive(c)) killPid(c);
};

/**
 * Where the cluster's folder goes: RELIABILITY_TMPDIR, else /dev/shm when there is one. The
 * faults here are process crashes, which lose nothing the page cache holds, so memory behaves as
 * a disk would for them; it spares three nodes and etcd the fsyncs of a disk shared with others.
 */
const baseParent = (): string => {
  if (process.env.RELIABILITY_TMPDIR) return process.env.RELIABILITY_TMPDIR;
  try {
    accessSync('/dev/shm', constants.W_OK);
    return '/dev/shm';
  } catch {
    return tmpdir();
  }
};

// ------------------------------------------------------------------ cleanup, whatever happens

const live = new Set<PatroniCluster>();
let guarded = false;
const cleanupEverything = (): void => {
  for (const c of live) c.destroySync();
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

// ------------------------------------------------------------------ the cluster

export interface Member {
  readonly name: string;
  readonly role: string;
  readonly state: string;
  readonly timeline?: number;
  readonly lag?: number | string;
}

export interface NodeSpec {
  readonly name: string;
  readonly pgPort: number;
  readonly restPort: number;
  readonly dataDir: string;
  readonly config: string;
  readonly log: string;
}

export interface ClusterOptions {
  readonly nodes?: number;
  readonly log?: (line: string) => void;
}

/** A started process: its pid and log file. */
interface Proc {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly label: string;
}

export class PatroniCluster {
  readonly base: string;
  readonly nodes: NodeSpec[] = [];
  etcdPort = 0;
  private etcdPeerPort = 0;
  haproxyPort = 0;
  private readonly procs = new Map<string, Proc>();
  private readonly log: (line: string) => void;

  private constructor(options: ClusterOptions) {
    guard();
    this.log = options.log ?? (() => undefined);
    this.base = mkdtempSync(join(baseParent(), 'reliability-patroni-'));
    own(this.base);
    live.add(this);
  }

  /** etcd, then every Patroni node at once (one bootstraps, the others clone it), then HAProxy. */
  static async start(options: ClusterOptions = {}): Promise<PatroniCluster> {
    const cluster = new PatroniCluster(options);
    try {
      await cluster.boot(options.nodes ?? 3);
      return cluster;
    } catch (e) {
      await cluster.destroy();
      throw e;
    }
  }

  /** The route clients use: HAProxy's port, which forwards to the node Patroni calls primary. */
  url(database = 'postgres'): string {
    return `postgres://postgres@${HOST}:${this.haproxyPort}/${database}`;
  }

  nodeUrl(node: NodeSpec, database = 'postgres'): string {
    return `postgres://postgres@${HOST}:${node.pgPort}/${database}`;
  }

  node(name: string): NodeSpec {
    const n = this.nodes.find((x) => x.name === name);
    if (!n) throw new Error(`no node ${name}`);
    return n;
  }

  private async boot(count: number): Promise<void> {
    [this.etcdPort, this.etcdPeerPort, this.haproxyPort] = [await freePort(), await freePort(), await freePort()];
    for (let i = 1; i <= count; i++) {
      const name = `node${i}`;
      this.nodes.push({
        name,
        pgPort: await freePort(),
        restPort: await freePort(),
        dataDir: join(this.base, name, 'data'),
        config: join(this.base, name, 'patroni.yml'),
        log: join(this.base, name, 'patroni.log'),
      });
    }
    this.startEtcd();
    await this.until('etcd to answer', async () => (await this.http('GET', `http://${HOST}:${this.etcdPort}/health`)).status === 200, 30_000);
    for (const n of this.nodes) {
      mkdirSync(join(this.base, n.name));
      own(join(this.base, n.name));
      mkdirSync(join(this.base, n.name, 'sock'));
      own(join(this.base, n.name, 'sock'));
      writeFileSync(n.config, JSON.stringify(this.patroniConfig(n), null, 2));
      own(n.config);
      this.startPatroni(n);
    }
    await this.waitHealthy(this.nodes.length, 120_000);
    this.startHaproxy();
    // HAProxy takes every server as up until its checks say otherwise (fall 2 x 500 ms): only a
    // run of answers from the primary over a few seconds says the route is settled.
    let since = 0;
    await this.until('HAProxy to route to the primary alone', async () => {
      const primary = await this.queryVia(this.url(), 'SELECT pg_is_in_recovery() AS r').then((r) => r[0]?.r === false, () => false);
      since = primary ? since || Date.now() : 0;
      return primary && Date.now() - since > 2500;
    }, 30_000);
    const members = await this.members();
    this.log(`  failover: Patroni ${members.map((m) => `${m.name} ${m.role}`).join(', ')}; HAProxy 127.0.0.1:${this.haproxyPort}, etcd 127.0.0.1:${this.etcdPort}`);
  }

  private spawnAs(label: string, program: string, args: readonly string[], logFile: string, asPostgres: boolean): Proc {
    const fd = openSync(logFile, 'a');
    own(logFile);
    const ids = asPostgres && isRoot() ? postgresUser() : undefined;
    const child = spawn(program, [...args], {
      stdio: ['ignore', fd, fd],
      env: { PATH: `${PG_BIN}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`, HOME: this.base, LC_ALL: 'C.UTF-8', LANG: 'C.UTF-8' },
      ...(ids ? { uid: ids.uid, gid: ids.gid } : {}),
      cwd: this.base,
    });
    closeSync(fd);
    child.on('error', (e) => this.log(`  failover: ${label} could not start: ${String(e)}`));
    if (child.pid === undefined) throw new Error(`${label} (${program}) did not start`);
    const proc = { child, pid: child.pid, label };
    this.procs.set(label, proc);
    return proc;
  }

  private startEtcd(): void {
    const peer = `http://${HOST}:${this.etcdPeerPort}`;
    const client = `http://${HOST}:${this.etcdPort}`;
    const dir = join(this.base, 'etcd');
    mkdirSync(dir, { mode: 0o700 });
    own(dir);
    this.spawnAs('etcd', 'etcd', [
      '--name', 'etcd0', '--data-dir', dir,
      '--listen-client-urls', client, '--advertise-client-urls', client,
      '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer,
      '--initial-cluster', `etcd0=${peer}`, '--initial-cluster-state', 'new', '--initial-cluster-token', SCOPE,
      '--logger', 'zap', '--log-level', 'warn',
    ], join(this.base, 'etcd.log'), true);
  }

  /** The node's Patroni configuration (JSON is YAML); docs/ha/patroni.yml is the one for users. */
  private patroniConfig(n: NodeSpec): Record<string, unknown> {
    return {
      scope: SCOPE,
      name: n.name,
      log: { level: process.env.RELIABILITY_PATRONI_LOG ?? 'WARNING' },
      restapi: { listen: `${HOST}:${n.restPort}`, connect_address: `${HOST}:${n.restPort}` },
      etcd3: { hosts: [`${HOST}:${this.etcdPort}`] },
      bootstrap: {
        dcs: {
          ttl: 10,
          loop_wait: 1,
          retry_timeout: 4,
          maximum_lag_on_failover: 1_048_576,
          synchronous_mode: true,
          synchronous_mode_strict: true,
          postgresql: {
            use_pg_rewind: true,
            use_slots: true,
            parameters: {
              wal_level: 'replica',
              hot_standby: 'on',
              wal_log_hints: 'on',
              max_connections: 50,
              max_wal_senders: 10,
              max_replication_slots: 10,
              wal_keep_size: '128MB',
              shared_buffers: '32MB',
            },
          },
        },
        initdb: [{ encoding: 'UTF8' }, { locale: 'C' }, 'no-sync'],
      },
      postgresql: {
        listen: `${HOST}:${n.pgPort}`,
        connect_address: `${HOST}:${n.pgPort}`,
        data_dir: n.dataDir,
        bin_dir: PG_BIN,
        pgpass: join(this.base, n.name, 'pgpass'),
        // Loopback only, no password: a harness cluster nobody else can reach.
        pg_hba: ['local all all trust', `host all all ${HOST}/32 trust`, `host replication all ${HOST}/32 trust`],
        authentication: {
          superuser: { username: 'postgres', password: 'reliability' },
          replication: { username: 'replicator', password: 'reliability' },
          rewind: { username: 'postgres', password: 'reliability' },
        },
        parameters: {
          unix_socket_directories: join(this.base, n.name, 'sock'),
          logging_collector: 'on',
          log_directory: join(this.base, n.name, 'pglog'),
          log_min_messages: 'warning',
          shared_buffers: '32MB',
          max_connections: 50,
        },
      },
      tags: { nofailover: false, noloadbalance: false, clonefrom: false, nosync: false },
    };
  }

  startPatroni(n: NodeSpec): void {
    this.spawnAs(`patroni ${n.name}`, 'patroni', [n.config], n.log, true);
  }

  private startHaproxy(): void {
    const cfg = join(this.base, 'haproxy.cfg');
    const servers = this.nodes.map((n) => `  server ${n.name} ${HOST}:${n.pgPort} maxconn 40 check port ${n.restPort}`).join('\n');
    writeFileSync(
      cfg,
      `global
  maxconn 200

defaults
  mode tcp
  retries 2
  timeout connect 2s
  timeout client 30m
  timeout server 30m
  timeout check 1s

listen primary
  bind ${HOST}:${this.haproxyPort}
  option httpchk GET /primary
  http-check expect status 200
  default-server inter 500ms fastinter 250ms fall 2 rise 1 on-marked-down shutdown-sessions
${servers}
`,
    );
    own(cfg);
    this.spawnAs('haproxy', 'haproxy', ['-db', '-f', cfg], join(this.base, 'haproxy.log'), true);
  }

  // ---------------------------------------------------------------- reading the cluster

  async http(method: 'GET' | 'POST', url: string, body?: unknown, timeoutMs = 5000): Promise<{ status: number; text: string }> {
    try {
      const r = await fetch(url, {
        method,
        ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      return { status: r.status, text: await r.text() };
    } catch (e) {
      return { status: 0, text: String(e) };
    }
  }

  /** Patroni's view of the members, from any node whose REST API answers. */
  async members(): Promise<Member[]> {
    for (const n of this.nodes) {
      const r = await this.http('GET', `http://${HOST}:${n.restPort}/cluster`, undefined, 2000);
      if (r.status !== 200) continue;
      const parsed = JSON.parse(r.text) as { members?: Member[] };
      return parsed.members ?? [];
    }
    return [];
  }

  async leader(): Promise<Member | undefined> {
    return (await this.members()).find((m) => m.role === 'leader' && m.state === 'running');
  }

  /**
   * A leader running, a synchronous standby, and `expected` members running or streaming: the
   * state every event starts from and must come back to.
   */
  async waitHealthy(expected: number, timeoutMs: number): Promise<Member[]> {
    let members: Member[] = [];
    await this.until(`a leader, a synchronous standby and ${expected} members running`, async () => {
      members = await this.members();
      const up = members.filter((m) => m.state === 'running' || m.state === 'streaming');
      return up.length >= expected && members.some((m) => m.role === 'leader' && m.state === 'running') && members.some((m) => m.role === 'sync_standby');
    }, timeoutMs);
    return members;
  }

  async queryVia<T extends Record<string, unknown>>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
    const c = new Client({ connectionString: url, connectionTimeoutMillis: 3000, statement_timeout: 10_000, query_timeout: 12_000 });
    c.on('error', () => undefined);
    await c.connect();
    try {
      return (await c.query<T>(sql, params)).rows;
    } finally {
      await c.end().catch(() => undefined);
    }
  }

  async until(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last: unknown;
    for (;;) {
      try {
        if (await check()) return;
      } catch (e) {
        last = e;
      }
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (${String(last)})` : ''}\n${this.tails()}`);
      await sleep(200);
    }
  }

  /** The last lines of every log, for a failure message. */
  tails(lines = 8): string {
    const tail = (file: string) => {
      try {
        return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
      } catch {
        return '(no log)';
      }
    };
    return [['etcd', join(this.base, 'etcd.log')] as const, ['haproxy', join(this.base, 'haproxy.log')] as const, ...this.nodes.map((n) => [n.name, n.log] as const)]
      .map(([label, file]) => `--- ${label}\n${tail(file)}`)
      .join('\n');
  }

  // ---------------------------------------------------------------- faults

  /** Switchover through Patroni's REST API, from the leader to a named candidate; waits for its answer. */
  async switchover(leader: string, candidate: string): Promise<{ status: number; text: string }> {
    return this.http('POST', `http://${HOST}:${this.node(leader).restPort}/switchover`, { leader, candidate }, 60_000);
  }

  /** kill -9 of a node's postmaster; its Patroni stays up. */
  async killPostmasterOf(name: string): Promise<number> {
    const pid = postmasterOf(this.node(name).dataDir);
    if (pid === undefined) throw new Error(`${name} has no running postmaster`);
    await killPostmaster(pid);
    return pid;
  }

  /** The loss of a node: its Patroni, then its postmaster, SIGKILLed. */
  async loseNode(name: string): Promise<void> {
    const n = this.node(name);
    const proc = this.procs.get(`patroni ${name}`);
    if (proc) {
      killPid(proc.pid);
      this.procs.delete(`patroni ${name}`);
    }
    const pid = postmasterOf(n.dataDir);
    if (pid !== undefined) await killPostmaster(pid);
  }

  // ---------------------------------------------------------------- teardown

  private stopped = false;

  /**
   * Processes whose command line names this cluster's folder (its postmasters, started by Patroni
   * through a helper that leaves Patroni's session, so they outlive it and its process group).
   */
  private strays(): number[] {
    const found: number[] = [];
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const pid = Number(entry);
      if (pid !== process.pid && cmdlineOf(pid).includes(this.base) && alive(pid)) found.push(pid);
    }
    return found;
  }

  /** Patroni first (so nothing restarts PostgreSQL), then every postmaster (immediate shutdown), HAProxy, etcd; then the folder. */
  async destroy(): Promise<void> {
    if (this.stopped) return;
    for (const [label, p] of this.procs) if (label.startsWith('patroni')) killPid(p.pid);
    // A postmaster Patroni had just begun to start appears within moments.
    await sleep(300);
    const postmasters = this.strays().filter((pid) => !(new Set([...this.procs.values()].map((p) => p.pid))).has(pid));
    // SIGQUIT is PostgreSQL's immediate shutdown: it still removes its shared memory.
    for (const pid of postmasters) killPid(pid, 'SIGQUIT');
    const deadline = Date.now() + 5000;
    while (postmasters.some(alive) && Date.now() < deadline) await sleep(50);
    this.destroySync();
  }

  /** Everything by pid, for exit and signal handlers too (it waits, bounded, without the event loop). */
  destroySync(): void {
    if (this.stopped) return;
    this.stopped = true;
    const pause = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
    for (const p of this.procs.values()) killPid(p.pid);
    // Sweep for a while: a postmaster whose start was under way when Patroni died shows up late.
    const sweepUntil = Date.now() + 1500;
    const seen = new Set<number>([...this.procs.values()].map((p) => p.pid));
    do {
      for (const pid of this.strays()) {
        for (const c of childrenOf(pid)) killPid(c);
        killPid(pid);
        seen.add(pid);
      }
      pause(100);
    } while (Date.now() < sweepUntil);
    // A process just SIGKILLed may still be writing a file: wait (bounded) until every one is gone.
    const until = Date.now() + 3000;
    while ([...seen].some(alive) && Date.now() < until) pause(20);
    this.procs.clear();
    try {
      rmSync(this.base, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
    } catch (e) {
      console.error(`reliability: could not remove ${this.base}: ${String(e)}`);
    }
    live.delete(this);
  }

  /** Whether a file exists in the cluster's folder (for a check after destroy). */
  static leftBehind(base: string): boolean {
    return existsSync(base);
  }
}
