import { execFileSync } from 'node:child_process';
import { ConnectionError } from '../../application/openErrors';
import { PreconditionError, isStartBarrierError, type ToolExecutionStartCommand } from '../../domain';
import { buildScenario } from '../../domain/scenario';
import { checkStore, type StoreProblem } from '../../testkit/invariants';
import { postgresRaw } from '../../testkit/rawSql';
import { sleep } from '../lib/random';
import { openAuthority, type AnyAuthority } from '../lib/stores';
import { PatroniCluster, postmasterOf, type Member } from './patroniCluster';

// PostgreSQL failover on a real HA engine (R13.2): Patroni with etcd, three PostgreSQL 15 nodes,
// synchronous_mode and synchronous_mode_strict, clients through HAProxy (patroniCluster.ts).
// The harness never promotes, fences or rewinds anything itself: it only causes faults and
// watches. Clients run starts through HAProxy the whole time; per fault it counts the starts
// acknowledged, found on every node once they caught up, lost, partial, ambiguous (the answer
// never came) and how replaying the same command settled each (created / existing), the
// longest time with no start acknowledged, and every error class callers saw.

export const FAILOVER_EVENTS = ['switchover', 'kill_postmaster', 'node_loss', 'second_fault'] as const;
export type FailoverEvent = (typeof FAILOVER_EVENTS)[number];

export interface FailoverOptions {
  readonly events: readonly FailoverEvent[];
  readonly clients: number;
  /** Load through HAProxy before each fault. */
  readonly loadBeforeMs: number;
  /** Load after the cluster is whole again (three members, a synchronous standby). */
  readonly loadAfterMs: number;
  /** Bound on the starts one client begins during one event. */
  readonly maxStartsPerClient: number;
  /** Bound on one event's recovery (a leader, a synchronous standby, every member back). */
  readonly eventTimeoutMs: number;
  /** The whole phase's bound; the cluster is removed whatever happens. */
  readonly timeoutMs: number;
  readonly log?: (line: string) => void;
}

export interface EventReport {
  readonly event: FailoverEvent;
  /** What was done, e.g. `switchover node1 -> node2`. */
  readonly fault: string;
  readonly leaderBefore: string;
  readonly leaderAfter: string;
  readonly timelines: { readonly before: number; readonly after: number };
  readonly acknowledged: number;
  /** Acknowledged starts every node holds, with the digest the client was given, once all caught up. */
  readonly foundOnEveryNode: number;
  readonly nodes: number;
  readonly lost: number;
  readonly partial: number;
  /** Starts whose answer never came (STORE_UNAVAILABLE or an untyped error while in flight). */
  readonly ambiguous: number;
  readonly settledCreated: number;
  readonly settledExisting: number;
  readonly unsettled: number;
  /** Starts refused with a verdict (PRECONDITION_FAILED and the like): none is expected in a failover. */
  readonly refused: number;
  /** Of those, refusals the caught-up leader contradicts (the Run it said was missing is there). */
  readonly staleVerdicts: number;
  /** The longest time, during the event's load, with no start acknowledged by any client. */
  readonly longestGapMs: number;
  /** From the fault until a leader, a synchronous standby, every member and a new acknowledged start. */
  readonly recoveryMs: number;
  /** Error class (code and reason; `untyped <SQLSTATE or name>` when not a StartBarrierError) -> count. */
  readonly errors: Readonly<Record<string, number>>;
  readonly untyped: number;
  /** One message per error class, for the reader. */
  readonly samples: Readonly<Record<string, string>>;
  readonly problems: readonly StoreProblem[];
}

export interface FailoverReport {
  readonly engine: string;
  readonly ports: { readonly haproxy: number; readonly etcd: number; readonly nodes: readonly number[] };
  readonly events: readonly EventReport[];
  readonly acknowledged: number;
  readonly found: number;
  readonly lost: number;
  readonly partial: number;
  readonly ambiguous: number;
  readonly resolvedExisting: number;
  readonly resolvedCreated: number;
  readonly untyped: number;
  readonly problems: readonly StoreProblem[];
  readonly failures: readonly string[];
  readonly durationMs: number;
  readonly ok: boolean;
}

const DB = 'barrier';

/** Typed errors that say nothing was written and the same command may run again at once. */
const RETRY_CODES = new Set(['CONCURRENCY_EXHAUSTED', 'TRANSACTION_TIMEOUT']);
/** Typed errors that are a verdict on the command: in a failover they are a failure. */
const VERDICT_CODES = new Set(['VALIDATION_FAILED', 'PRECONDITION_FAILED', 'SEMANTIC_CONFLICT', 'CORRUPT_RECORD', 'EXECUTION_REFUSED']);

export const errorClass = (e: unknown): { readonly name: string; readonly typed: boolean } => {
  // Opening an authority has its own typed error (code CONNECTION_FAILED with a reason).
  if (isStartBarrierError(e) || e instanceof ConnectionError) {
    const reason = (e as { reason?: unknown }).reason;
    return { name: `${e.code}${typeof reason === 'string' ? ` ${reason}` : ''}`, typed: true };
  }
  const code = (e as { code?: unknown })?.code;
  return { name: `untyped ${typeof code === 'string' ? code : e instanceof Error ? e.constructor.name : typeof e}`, typed: false };
};

const versionOf = (program: string, args: readonly string[], pattern: RegExp): string => {
  try {
    return pattern.exec(execFileSync(program, [...args], { encoding: 'utf8', timeout: 20_000 }))?.[1] ?? '?';
  } catch {
    return '?';
  }
};

interface Ack {
  readonly digest: string;
  /** When its prepare began, and when the answer came. */
  readonly begun: number;
  readonly at: number;
}

/** What the clients saw during one event. */
class EventLoad {
  readonly acks = new Map<string, Ack>();
  readonly ambiguous = new Set<string>();
  readonly errors = new Map<string, number>();
  readonly samples = new Map<string, string>();
  /** Starts answered with a verdict (a refusal) during the event: checked against the leader afterwards. */
  readonly refused: { readonly startId: string; readonly runId: string; readonly message: string }[] = [];
  settledCreated = 0;
  settledExisting = 0;
  unsettled = 0;
  untyped = 0;
  stop = false;
  readonly startedAt = Date.now();
  endedAt = 0;
  constructor(
    readonly event: FailoverEvent,
    readonly hardDeadline: number,
  ) {}

  saw(e: unknown): { readonly name: string; readonly typed: boolean; readonly code?: string } {
    const c = errorClass(e);
    this.errors.set(c.name, (this.errors.get(c.name) ?? 0) + 1);
    if (!this.samples.has(c.name)) this.samples.set(c.name, String((e as Error)?.message ?? e).split('\n')[0]!.slice(0, 200));
    if (!c.typed) this.untyped++;
    return { ...c, ...(isStartBarrierError(e) ? { code: e.code } : {}) };
  }

  /** An error no caller could catch: it reached the process itself. */
  crash(e: unknown, code: string): void {
    const name = `untyped crash ${code}`;
    this.errors.set(name, (this.errors.get(name) ?? 0) + 1);
    if (!this.samples.has(name)) this.samples.set(name, String((e as Error)?.message ?? e).slice(0, 200));
    this.untyped++;
  }

  longestGap(): number {
    const times = [this.startedAt, ...[...this.acks.values()].map((a) => a.at).sort((a, b) => a - b), this.endedAt || Date.now()];
    let gap = 0;
    for (let i = 1; i < times.length; i++) gap = Math.max(gap, times[i]! - times[i - 1]!);
    return gap;
  }
}

/** One caller of the library: its own authority, opened once on the HAProxy route and kept. */
class LoadClient {
  private authority: AnyAuthority | undefined;
  private consecutiveFailures = 0;
  reopened = 0;

  constructor(
    readonly id: number,
    readonly url: string,
    readonly failures: string[],
  ) {}

  private async open(): Promise<AnyAuthority> {
    this.authority ??= await openAuthority('postgres', this.url, { migrate: false });
    return this.authority;
  }

  /** After many failures in a row, start again with a fresh authority, as a service would restart its pool. */
  private async failed(): Promise<void> {
    if (++this.consecutiveFailures < 25) return;
    this.consecutiveFailures = 0;
    this.reopened++;
    await this.authority?.close().catch(() => undefined);
    this.authority = undefined;
  }

  async close(): Promise<void> {
    await this.authority?.close().catch(() => undefined);
    this.authority = undefined;
  }

  /** Runs starts until the event says stop; an ambiguous start is replayed until it settles. */
  async run(load: EventLoad, maxStarts: number): Promise<void> {
    for (let n = 0; n < maxStarts && !load.stop && Date.now() < load.hardDeadline; n++) {
      const s = buildScenario({ prefix: `${load.event}-c${this.id}-${n}-${Date.now().toString(36)}`, withApproval: n % 3 === 2 });
      let ok = true;
      for (const c of s.lifecycle) {
        ok = await this.drive(load, async (a) => {
          try {
            await a.runs.handle(c);
          } catch (e) {
            // Replaying after an unknown answer: what already committed is refused as done.
            if (e instanceof PreconditionError && ['run_exists', 'step_run_exists', 'invalid_transition'].includes(e.reason)) return;
            throw e;
          }
        });
        if (!ok) break;
      }
      if (ok) await this.start(load, s.startCommand());
      await sleep(10);
    }
  }

  /** One lifecycle command, re-driven until it answers (bounded by the event's hard deadline). */
  private async drive(load: EventLoad, op: (a: AnyAuthority) => Promise<void>): Promise<boolean> {
    while (Date.now() < load.hardDeadline) {
      try {
        await op(await this.open());
        this.consecutiveFailures = 0;
        return true;
      } catch (e) {
        const c = load.saw(e);
        if (c.code !== undefined && VERDICT_CODES.has(c.code)) {
          this.failures.push(`${load.event} client ${this.id}: lifecycle command refused: ${String(e)}`);
          return false;
        }
        await this.failed();
        await sleep(c.code !== undefined && RETRY_CODES.has(c.code) ? 5 + Math.floor(Math.random() * 20) : 100);
      }
    }
    return false;
  }

  private async start(load: EventLoad, command: ToolExecutionStartCommand): Promise<void> {
    const id = command.startId;
    while (Date.now() < load.hardDeadline) {
      const begun = Date.now();
      try {
        const r = await (await this.open()).barriers.prepare(command);
        this.consecutiveFailures = 0;
        load.acks.set(id, { digest: r.barrier.barrierDigest, begun, at: Date.now() });
        if (load.ambiguous.has(id)) {
          if (r.outcome === 'existing') load.settledExisting++;
          else load.settledCreated++;
        } else if (r.outcome !== 'created') this.failures.push(`${load.event} client ${this.id}: ${id} answered ${r.outcome} on its first try`);
        return;
      } catch (e) {
        const c = load.saw(e);
        if (c.code !== undefined && VERDICT_CODES.has(c.code)) {
          load.refused.push({ startId: id, runId: command.stepRun.runId, message: String(e) });
          return;
        }
        // Nothing written (typed retry, or the authority did not open), or unknown (unavailable,
        // untyped): the same command again.
        if (!(e instanceof ConnectionError) && (c.code === undefined || !RETRY_CODES.has(c.code))) load.ambiguous.add(id);
        await this.failed();
        await sleep(c.code !== undefined && RETRY_CODES.has(c.code) ? 5 + Math.floor(Math.random() * 20) : 100);
      }
    }
    if (load.ambiguous.has(id)) load.unsettled++;
  }
}

export const runFailover = async (options: FailoverOptions): Promise<FailoverReport> => {
  const log = options.log ?? (() => undefined);
  const started = Date.now();
  const failures: string[] = [];
  const engine = [
    `Patroni ${versionOf('patroni', ['--version'], /patroni\s+(\S+)/i)}`,
    `etcd ${versionOf('etcd', ['--version'], /etcd Version:\s*(\S+)/i)}`,
    `HAProxy ${versionOf('haproxy', ['-v'], /version\s+(\S+)/i)}`,
  ].join(', ');
  let cluster: PatroniCluster | undefined;
  let aborted = false;
  let deadlineTimer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    deadlineTimer = setTimeout(() => {
      aborted = true;
      reject(new Error(`failover phase exceeded its ${options.timeoutMs} ms bound`));
    }, options.timeoutMs);
  });
  const clients: LoadClient[] = [];
  // A driver 'error' event nobody listens to (a connection the library holds dies between two
  // statements) would end the caller's process. Counted here as what it is, an untyped crash,
  // so the phase goes on and reports it; anything else still ends the run.
  let current: EventLoad | undefined;
  const crashes = (e: unknown) => {
    const pgError = typeof e === 'object' && e !== null && typeof (e as { severity?: unknown }).severity === 'string';
    if (!pgError || current === undefined) {
      console.error('reliability: uncaught in the failover phase:', e);
      process.exit(1);
    }
    const code = String((e as { code?: unknown }).code ?? '');
    current.crash(e, code);
    failures.push(`${current.event}: a driver 'error' event with no listener (${code} ${String((e as Error).message)}): it would end the caller's process`);
  };
  process.on('uncaughtException', crashes);
  try {
    return await Promise.race([scenario(), deadline]);
  } finally {
    process.off('uncaughtException', crashes);
    aborted = true;
    clearTimeout(deadlineTimer);
    await Promise.all(clients.map((c) => c.close()));
    await cluster?.destroy();
  }

  async function scenario(): Promise<FailoverReport> {
    log(`  failover: ${engine}; three PostgreSQL 15 nodes, synchronous_mode_strict, clients through HAProxy`);
    cluster = await PatroniCluster.start({ log });
    const c = cluster;
    // Set-up through HAProxy too, re-tried a few times (a check may still mark a server down).
    const setUp = async (what: string, op: () => Promise<unknown>) => {
      for (let i = 1; ; i++) {
        try {
          return await op();
        } catch (e) {
          if (i >= 5 || /already exists/.test(String(e))) throw new Error(`${what}: ${String(e)}`);
          await sleep(1000);
        }
      }
    };
    await setUp('CREATE DATABASE', () => c.queryVia(c.url(), `CREATE DATABASE ${DB}`).catch((e: unknown) => {
      if (!/already exists/.test(String(e))) throw e;
    }));
    await setUp('migrate', async () => (await openAuthority('postgres', c.url(DB))).close()); // once, through HAProxy
    for (let i = 0; i < options.clients; i++) clients.push(new LoadClient(i, c.url(DB), failures));

    const verified = new Set<string>();
    const events: EventReport[] = [];
    for (const event of options.events) {
      if (aborted) break;
      events.push(await runEvent(c, event, verified));
    }

    const sum = (f: (e: EventReport) => number) => events.reduce((s, e) => s + f(e), 0);
    const problems = events.flatMap((e) => e.problems);
    for (const e of events) {
      if (e.foundOnEveryNode !== e.acknowledged) failures.push(`${e.event}: ${e.foundOnEveryNode} of ${e.acknowledged} acknowledged starts on every node`);
      if (e.unsettled > 0) failures.push(`${e.event}: ${e.unsettled} ambiguous starts never settled`);
      if (e.acknowledged === 0) failures.push(`${e.event}: no start acknowledged`);
    }
    const report = {
      engine,
      ports: { haproxy: c.haproxyPort, etcd: c.etcdPort, nodes: c.nodes.map((n) => n.pgPort) },
      events,
      acknowledged: sum((e) => e.acknowledged),
      found: sum((e) => e.foundOnEveryNode),
      lost: sum((e) => e.lost),
      partial: sum((e) => e.partial),
      ambiguous: sum((e) => e.ambiguous),
      resolvedExisting: sum((e) => e.settledExisting),
      resolvedCreated: sum((e) => e.settledCreated),
      untyped: sum((e) => e.untyped),
      problems,
      failures,
      durationMs: Date.now() - started,
    };
    // The goal includes 0 untyped errors: an untyped one leaves the caller guessing what happened.
    const ok = failures.length === 0 && problems.length === 0 && report.lost === 0 && report.partial === 0 && report.untyped === 0 && report.resolvedExisting + report.resolvedCreated === report.ambiguous;
    return { ...report, ok };
  }

  async function runEvent(c: PatroniCluster, event: FailoverEvent, verified: Set<string>): Promise<EventReport> {
    const before = await c.waitHealthy(c.nodes.length, options.eventTimeoutMs);
    const leader0 = before.find((m) => m.role === 'leader')!;
    const sync0 = before.find((m) => m.role === 'sync_standby')!;
    const load = new EventLoad(event, Date.now() + options.loadBeforeMs + options.eventTimeoutMs + options.loadAfterMs + 30_000);
    current = load;
    const loops = clients.map((client) => client.run(load, options.maxStartsPerClient));
    let fault = '';
    let faultAt = 0;
    let recoveryMs = 0;
    try {
      await sleep(options.loadBeforeMs);
      if (load.acks.size === 0) await c.until('a first acknowledged start', async () => load.acks.size > 0, 30_000);
      faultAt = Date.now();
      const newLeader = () => c.until('a new leader', async () => ((await c.leader())?.name ?? leader0.name) !== leader0.name, options.eventTimeoutMs);
      switch (event) {
        case 'switchover': {
          const r = await c.switchover(leader0.name, sync0.name);
          fault = `switchover ${leader0.name} -> ${sync0.name} (REST ${r.status})`;
          // Patroni answers 503 "status unknown" when it stops polling; the leader's name is the verdict.
          if (r.status !== 200) await newLeader().catch(() => failures.push(`switchover not done by Patroni: ${r.status} ${r.text}`));
          break;
        }
        case 'kill_postmaster': {
          const pid = await c.killPostmasterOf(leader0.name);
          fault = `kill -9 postmaster ${pid} of leader ${leader0.name}`;
          // Until Patroni notices, its members still read `running`.
          await c.until('Patroni to start PostgreSQL again', async () => ![undefined, pid].includes(postmasterOf(c.node(leader0.name).dataDir)), options.eventTimeoutMs);
          break;
        }
        case 'node_loss': {
          await c.loseNode(leader0.name);
          await newLeader();
          c.startPatroni(c.node(leader0.name));
          fault = `lost leader ${leader0.name} (Patroni and PostgreSQL SIGKILLed), rejoined after ${(await c.leader())?.name} led`;
          break;
        }
        case 'second_fault': {
          await c.loseNode(leader0.name);
          await newLeader();
          const second = (await c.leader())!.name;
          const pid = await c.killPostmasterOf(second);
          c.startPatroni(c.node(leader0.name));
          await c.until('Patroni to start PostgreSQL again', async () => ![undefined, pid].includes(postmasterOf(c.node(second).dataDir)), options.eventTimeoutMs);
          fault = `lost leader ${leader0.name}, then kill -9 postmaster ${pid} of the new leader ${second}`;
          break;
        }
      }
      log(`  failover: ${event}: ${fault}`);
      await c.waitHealthy(c.nodes.length, options.eventTimeoutMs);
      await c.until('a start begun after the fault and acknowledged', async () => [...load.acks.values()].some((a) => a.begun > faultAt), options.eventTimeoutMs);
    } finally {
      // Recovered (or given up): a little more load, then the clients settle what is open and stop.
      recoveryMs = Date.now() - faultAt;
      if (!aborted) await sleep(options.loadAfterMs);
      load.stop = true;
      await Promise.all(loops);
      load.endedAt = Date.now();
    }

    // Every node caught up with the leader, then the counts, node by node.
    const members = await c.waitHealthy(c.nodes.length, options.eventTimeoutMs);
    const leader = members.find((m) => m.role === 'leader')!;
    const leaderNode = c.node(leader.name);
    const [{ lsn }] = (await c.queryVia<{ lsn: string }>(c.nodeUrl(leaderNode), 'SELECT pg_current_wal_lsn()::text AS lsn')) as [{ lsn: string }];
    for (const n of c.nodes) {
      if (n.name === leader.name) continue;
      await c.until(`${n.name} to replay up to ${lsn}`, async () => (await c.queryVia<{ ok: boolean }>(c.nodeUrl(n), 'SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok', [lsn]))[0]?.ok === true, 30_000);
    }
    const ids = [...load.acks.keys()];
    const onEvery = new Map<string, number>();
    for (const n of c.nodes) {
      const rows = await c.queryVia<{ start_id: string; barrier_digest: string }>(c.nodeUrl(n, DB), 'SELECT start_id, barrier_digest FROM ql3.tool_execution_start_barriers WHERE start_id = ANY($1)', [ids]);
      for (const r of rows) if (load.acks.get(r.start_id)?.digest === r.barrier_digest) onEvery.set(r.start_id, (onEvery.get(r.start_id) ?? 0) + 1);
    }
    const foundOnEveryNode = [...onEvery.values()].filter((k) => k === c.nodes.length).length;
    // A refusal is a verdict: wrong if the leader, caught up, holds what it said was missing
    // (a read answered by a node that had not replayed it yet).
    const refusedRuns = new Set((await c.queryVia<{ run_id: string }>(c.nodeUrl(leaderNode, DB), 'SELECT run_id FROM ql3.runs WHERE run_id = ANY($1)', [load.refused.map((r) => r.runId)])).map((r) => r.run_id));
    const staleVerdicts = load.refused.filter((r) => refusedRuns.has(r.runId)).length;
    for (const r of load.refused) {
      failures.push(`${event}: ${r.startId} refused (${r.message})${refusedRuns.has(r.runId) ? '; its Run IS on the leader: a stale read-only node answered' : ''}`);
    }
    const raw = await postgresRaw(c.nodeUrl(leaderNode, DB));
    const reader = await openAuthority('postgres', c.nodeUrl(leaderNode, DB), { migrate: false });
    let check;
    try {
      check = await checkStore(raw, reader.barriers, { acknowledged: new Map([...load.acks].map(([id, a]) => [id, a.digest])), verified });
    } finally {
      await raw.close();
      await reader.close();
    }
    const tl = (m: Member | undefined) => m?.timeline ?? 0;
    const report: EventReport = {
      event,
      fault,
      leaderBefore: leader0.name,
      leaderAfter: leader.name,
      timelines: { before: tl(leader0), after: tl(leader) },
      acknowledged: load.acks.size,
      foundOnEveryNode,
      nodes: c.nodes.length,
      lost: check.acknowledged - check.found,
      partial: check.partial,
      ambiguous: load.ambiguous.size,
      settledCreated: load.settledCreated,
      settledExisting: load.settledExisting,
      unsettled: load.unsettled,
      refused: load.refused.length,
      staleVerdicts,
      longestGapMs: load.longestGap(),
      recoveryMs,
      errors: Object.fromEntries([...load.errors].sort((a, b) => b[1] - a[1])),
      untyped: load.untyped,
      samples: Object.fromEntries(load.samples),
      problems: check.problems,
    };
    log(
      `  failover: ${event}: ${report.acknowledged} acknowledged, ${foundOnEveryNode} on all ${c.nodes.length} nodes, lost ${report.lost}, partial ${report.partial}, ambiguous ${report.ambiguous} (created ${report.settledCreated}, existing ${report.settledExisting}), gap ${(report.longestGapMs / 1000).toFixed(1)} s, leader ${leader0.name} -> ${leader.name}`,
    );
    return report;
  }
};
