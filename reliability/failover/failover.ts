import { join } from 'node:path';
import { PreconditionError, isStartBarrierError, type ToolExecutionStartCommand } from '../../domain';
import { buildScenario, type Scenario } from '../../domain/scenario';
import { checkStore, type StoreProblem } from '../../testkit/invariants';
import { postgresRaw } from '../../testkit/rawSql';
import { sleep } from '../lib/random';
import { openAuthority, type AnyAuthority } from '../lib/stores';
import { PgNode, freePort, makeBase, removeBase, runPg, writePgFile } from './pgCluster';

// PostgreSQL failover (R8's physical HA gate): a primary and a physical streaming standby, both
// made here (pgCluster.ts), with synchronous_commit = remote_apply. Clients run starts on the
// primary; the harness SIGKILLs the primary's postmaster mid-load, promotes the standby and
// points the clients at it. Then: every acknowledged start is on the new primary and whole;
// every client whose commit acknowledgement was lost replays the same command (existing, or
// created if it never committed); the old primary, restarted, is fenced (a start against it is
// refused) until pg_rewind makes it a synchronous standby of the new primary.

export interface FailoverOptions {
  readonly clients: number;
  /** Load on the primary before the kill. */
  readonly loadBeforeKillMs: number;
  /** Load on the new primary after the switch. */
  readonly loadAfterMs: number;
  /** The first standby's recovery_min_apply_delay: commits wait this long for their acknowledgement. */
  readonly applyDelayMs: number;
  /** Starts run after the old primary rejoins as a synchronous standby. */
  readonly startsAfterRejoin: number;
  /** The whole scenario's bound; cleanup runs whatever happens. */
  readonly timeoutMs: number;
  readonly log?: (line: string) => void;
}

export interface FailoverReport {
  readonly ports: readonly [number, number];
  readonly timelines: { readonly before: number; readonly promoted: number; readonly rewound: number };
  /** Starts some client saw acknowledged (before the kill, after it, after the rejoin). */
  readonly acknowledged: number;
  readonly acknowledgedBeforeKill: number;
  readonly found: number;
  readonly lost: number;
  readonly partial: number;
  /** Clients whose prepare was in flight when the primary died, and how the replay resolved. */
  readonly ambiguous: number;
  readonly resolvedExisting: number;
  readonly resolvedCreated: number;
  /** Typed safe-to-retry refusals (serialization, timeouts) a client answered by retrying. */
  readonly typedRetries: number;
  /** Commits the old primary made that never reached the standby (never acknowledged). */
  readonly divergedOnOldPrimary: number;
  readonly fenced: { readonly refused: boolean; readonly how: string };
  readonly rewound: { readonly streaming: boolean; readonly synchronous: boolean; readonly found: number; readonly expected: number };
  readonly problems: readonly StoreProblem[];
  readonly failures: readonly string[];
  readonly durationMs: number;
  readonly ok: boolean;
}

const DB = 'barrier';

/** The server went away, or is not there yet: not a verdict on the start. */
const isConnectionFailure = (e: unknown): boolean => {
  if (isStartBarrierError(e)) return e.code === 'STORE_UNAVAILABLE';
  const code = (e as { code?: unknown })?.code;
  if (typeof code === 'string' && (/^08/.test(code) || /^57P0/.test(code) || code === '25006' || /^E[A-Z]+$/.test(code))) return true;
  return /terminat|Connection|connect|ECONN|EPIPE|socket|shutting down|starting up|recovery/i.test(String((e as Error)?.message ?? e));
};

interface Ack {
  readonly digest: string;
  readonly beforeKill: boolean;
}

export const runFailover = async (options: FailoverOptions): Promise<FailoverReport> => {
  const log = options.log ?? (() => undefined);
  const started = Date.now();
  const base = makeBase('reliability-failover');
  // Ports the kernel hands out (never 5432): two runs at once cannot pick the same pair.
  const [p1, p2] = [await freePort(), await freePort()];
  const primary = new PgNode('primary', join(base, 'node1'), p1);
  const standby = new PgNode('standby', join(base, 'node2'), p2);
  const failures: string[] = [];
  /** Set when the bound is hit: every step and every client loop stops at its next turn. */
  let aborted = false;
  const step = <T>(value: T): T => {
    if (aborted) throw new Error('failover scenario aborted (over its time bound)');
    return value;
  };
  let deadlineTimer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    deadlineTimer = setTimeout(() => reject(new Error(`failover scenario exceeded its ${options.timeoutMs} ms bound`)), options.timeoutMs);
  });
  try {
    return await Promise.race([scenario(), deadline]);
  } finally {
    aborted = true;
    clearTimeout(deadlineTimer);
    await Promise.all([primary.stop('immediate').catch(() => undefined), standby.stop('immediate').catch(() => undefined)]);
    removeBase(base, [primary, standby]);
  }

  async function scenario(): Promise<FailoverReport> {
    // ---------------------------------------------------------------- the pair
    await primary.initdb();
    primary.ownSettings({
      wal_level: 'replica',
      max_wal_senders: '10',
      wal_keep_size: '256MB',
      wal_log_hints: 'on', // pg_rewind needs it (no data checksums here)
      hot_standby: 'on',
      synchronous_commit: 'remote_apply',
      shared_buffers: '32MB',
      max_connections: '60',
      fsync: 'on',
    });
    await primary.start();
    await primary.query(`CREATE DATABASE ${DB}`);
    step(undefined);

    const backup = await runPg('pg_basebackup', ['-h', '127.0.0.1', '-p', String(p1), '-U', 'postgres', '-D', standby.dir, '-X', 'stream', '-R', '-c', 'fast'], 120_000);
    if (backup.code !== 0) throw new Error(`pg_basebackup failed: ${backup.stderr}`);
    // A promoted node must not wait for a synchronous standby it does not have yet.
    // A standby that applies a little late (recovery_min_apply_delay): with remote_apply every
    // commit waits for it, so the kill finds commits flushed and shipped but not yet
    // acknowledged. Promotion applies them: their clients' replays answer `existing`.
    standby.ownSettings({
      primary_conninfo: `host=127.0.0.1 port=${p1} user=postgres application_name=node2`,
      synchronous_standby_names: '',
      recovery_min_apply_delay: `${options.applyDelayMs}ms`,
    });
    await standby.start();
    step(undefined);
    // Synchronous only now: with no standby yet, every commit would wait forever.
    await primary.query("ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (node2)'");
    await primary.query('SELECT pg_reload_conf()');
    await primary.until('a synchronous streaming standby', async () => {
      const rows = await primary.query<{ state: string; sync_state: string }>("SELECT state, sync_state FROM pg_stat_replication WHERE application_name = 'node2'");
      return rows[0]?.state === 'streaming' && rows[0]?.sync_state === 'sync';
    });
    const before = await primary.timeline();
    log(`  failover: primary 127.0.0.1:${p1} (timeline ${before}), synchronous standby 127.0.0.1:${p2} (remote_apply)`);
    await (await openAuthority('postgres', primary.url(DB))).close(); // migrate once, on the primary

    // ---------------------------------------------------------------- clients under load
    const acks = new Map<string, Ack>();
    const ambiguous = new Set<string>();
    let resolvedExisting = 0;
    let resolvedCreated = 0;
    let typedRetries = 0;
    let killed = false;
    let stop = false;
    let current = primary.url(DB);
    let switched!: () => void;
    const newPrimaryReady = new Promise<void>((resolve) => (switched = resolve));

    const tolerant = async (op: () => Promise<unknown>) => {
      try {
        await op();
      } catch (e) {
        // Re-driving after a failover: what already committed is refused as already done.
        if (e instanceof PreconditionError && ['run_exists', 'step_run_exists', 'invalid_transition'].includes(e.reason)) return;
        throw e;
      }
    };

    const client = async (id: number): Promise<void> => {
      let authority: AnyAuthority | undefined;
      let n = 0;
      try {
        while (!stop && !aborted) {
          const s: Scenario = buildScenario({ prefix: `c${id}-${n}-${Date.now().toString(36)}`, withApproval: n % 3 === 2 });
          n++;
          const command: ToolExecutionStartCommand = s.startCommand();
          let inFlight = false;
          for (let attempt = 0; ; attempt++) {
            try {
              authority ??= await openAuthority('postgres', current);
              for (const c of s.lifecycle) await tolerant(() => authority!.runs.handle(c));
              inFlight = true;
              const r = await authority.barriers.prepare(command);
              inFlight = false;
              acks.set(command.startId, { digest: r.barrier.barrierDigest, beforeKill: !killed });
              if (ambiguous.has(command.startId)) {
                if (r.outcome === 'existing') resolvedExisting++;
                else resolvedCreated++;
              } else if (r.outcome !== 'created') failures.push(`client ${id}: ${command.startId} answered ${r.outcome} on its first try`);
              break;
            } catch (e) {
              const code = isStartBarrierError(e) ? e.code : undefined;
              if ((code === 'CONCURRENCY_EXHAUSTED' || code === 'TRANSACTION_TIMEOUT') && attempt < 300 && !aborted) {
                // Safe to retry (nothing was written): the client tries the same command again.
                typedRetries++;
                await sleep(5 + Math.floor(Math.random() * 20));
                continue;
              }
              if (!isConnectionFailure(e) || attempt > 300 || aborted) {
                failures.push(`client ${id}: ${command.startId}: ${isStartBarrierError(e) ? e.code : 'untyped'} ${String(e)}`);
                break;
              }
              // The primary is gone: whether an in-flight start committed is unknown to us. Wait
              // for the new primary, then re-drive the same Run and replay the same command.
              if (inFlight) ambiguous.add(command.startId);
              inFlight = false;
              await authority?.close().catch(() => undefined);
              authority = undefined;
              await Promise.race([newPrimaryReady, sleep(200)]);
            }
          }
        }
      } finally {
        await authority?.close().catch(() => undefined);
      }
    };

    const loops = Array.from({ length: options.clients }, (_, i) => client(i));
    await sleep(options.loadBeforeKillMs);
    const beforeKillAcks = acks.size;
    killed = true;
    const pid = await primary.killPostmaster();
    step(undefined);
    log(`  failover: SIGKILL primary postmaster ${pid} with ${beforeKillAcks} starts acknowledged`);

    // ---------------------------------------------------------------- promotion and switch
    const promote = await runPg('pg_ctl', ['-D', standby.dir, '-w', '-t', '60', 'promote'], 70_000);
    if (promote.code !== 0) throw new Error(`promotion failed: ${promote.stderr}`);
    await standby.until('the promoted node to accept writes', async () => (await standby.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r'))[0]?.r === false);
    current = standby.url(DB);
    switched();
    const promoted = await standby.timeline();
    log(`  failover: standby promoted (timeline ${before} -> ${promoted}); clients switched to 127.0.0.1:${p2}`);
    await sleep(options.loadAfterMs);
    stop = true;
    await Promise.all(loops);
    step(undefined);

    // ---------------------------------------------------------------- fencing of the old primary
    // Restarted, it comes back as a standby with nowhere to stream from: it replays its own WAL
    // and stays in recovery, read-only, with what it had (including commits the new primary
    // never got). A start against it must be refused. It rejoins only through pg_rewind.
    writePgFile(join(primary.dir, 'standby.signal'), '');
    primary.ownSettings({ primary_conninfo: '' });
    await primary.start(true, 30).catch((e: unknown) => log(`  failover: old primary did not open for reads (${String(e).split('\n')[0]})`));
    let fenced = { refused: false, how: '' };
    {
      const s = buildScenario({ prefix: 'fence' });
      try {
        const a = await openAuthority('postgres', primary.url(DB));
        try {
          for (const c of s.lifecycle) await a.runs.handle(c);
          await a.barriers.prepare(s.startCommand());
          failures.push('the old primary accepted a start after the failover (split brain)');
        } finally {
          await a.close();
        }
      } catch (e) {
        fenced = { refused: true, how: `${(e as { code?: string }).code ?? ''} ${String((e as Error).message ?? e).split('\n')[0]}`.trim() };
      }
    }
    let divergedOnOldPrimary = 0;
    try {
      // And below the authority: any write on the fenced node is refused by the server itself.
      const write = await primary.query('CREATE TABLE fence_probe (x int)', [], DB).then(() => 'accepted', (e: unknown) => `${(e as { code?: string }).code ?? ''} ${(e as Error).message}`);
      if (write === 'accepted') failures.push('the old primary accepted a write after the failover');
      else fenced = { refused: fenced.refused, how: `${fenced.how}; a raw write: ${write}` };
      const inRecovery = (await primary.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r'))[0]?.r;
      if (inRecovery !== true) failures.push('the restarted old primary is not in recovery');
      const oldIds = (await primary.query<{ start_id: string }>('SELECT start_id FROM ql3.tool_execution_start_barriers', [], DB)).map((r) => r.start_id);
      const newIds = new Set((await standby.query<{ start_id: string }>('SELECT start_id FROM ql3.tool_execution_start_barriers', [], DB)).map((r) => r.start_id));
      const diverged = oldIds.filter((id) => !newIds.has(id));
      divergedOnOldPrimary = diverged.length;
      for (const id of diverged) if (acks.has(id) && !ambiguous.has(id)) failures.push(`${id} was acknowledged but only the old primary has it`);
    } catch (e) {
      log(`  failover: the fenced old primary refuses even reads (${String(e).split('\n')[0]})`);
    }
    await primary.stop('fast');
    step(undefined);

    // ---------------------------------------------------------------- pg_rewind and rejoin
    await standby.query('CHECKPOINT'); // pg_rewind reads the new timeline from the control file
    const rewind = await runPg('pg_rewind', ['--target-pgdata', primary.dir, '--source-server', `host=127.0.0.1 port=${p2} user=postgres dbname=postgres`, '--progress'], 120_000);
    if (rewind.code !== 0) throw new Error(`pg_rewind failed: ${rewind.stderr.slice(-2000)}`);
    // pg_rewind copied the new primary's settings: make the folder node1 again, a standby of node2.
    writePgFile(join(primary.dir, 'standby.signal'), '');
    primary.ownSettings({ primary_conninfo: `host=127.0.0.1 port=${p2} user=postgres application_name=node1`, synchronous_standby_names: '', recovery_min_apply_delay: '0' });
    await primary.start();
    await standby.query("ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (node1)'");
    await standby.query('SELECT pg_reload_conf()');
    let streaming = false;
    let synchronous = false;
    await standby.until('the rewound node as a synchronous standby', async () => {
      const rows = await standby.query<{ state: string; sync_state: string }>("SELECT state, sync_state FROM pg_stat_replication WHERE application_name = 'node1'");
      streaming = rows[0]?.state === 'streaming';
      synchronous = rows[0]?.sync_state === 'sync';
      return streaming && synchronous;
    });
    const rewoundTimeline = await primary.timeline();
    log(`  failover: old primary rewound, streaming from the new primary on timeline ${rewoundTimeline} (synchronous: ${synchronous})`);

    // A few starts on the new primary with the rejoined node synchronous (remote_apply).
    {
      const a = await openAuthority('postgres', standby.url(DB));
      try {
        for (let i = 0; i < options.startsAfterRejoin; i++) {
          const s = buildScenario({ prefix: `rejoin-${i}` });
          for (const c of s.lifecycle) await a.runs.handle(c);
          const r = await a.barriers.prepare(s.startCommand());
          acks.set(r.barrier.record.startId, { digest: r.barrier.barrierDigest, beforeKill: false });
        }
      } finally {
        await a.close();
      }
    }

    // ---------------------------------------------------------------- the checks
    const acknowledged = new Map([...acks].map(([id, a]) => [id, a.digest]));
    const authority = await openAuthority('postgres', standby.url(DB));
    const raw = await postgresRaw(standby.url(DB));
    let check;
    try {
      check = await checkStore(raw, authority.barriers, { acknowledged, full: true });
    } finally {
      await raw.close();
      await authority.close();
    }
    // Every acknowledged start also on the rewound node (remote_apply), read back verified there.
    let rewoundFound = 0;
    {
      const onStandby = await openAuthority('postgres', primary.url(DB), { migrate: false });
      try {
        for (const [startId, digest] of acknowledged) {
          const b = await onStandby.barriers.getByStartId(startId).catch(() => null);
          if (b?.barrierDigest === digest) rewoundFound++;
        }
      } finally {
        await onStandby.close();
      }
    }
    if (rewoundFound !== acknowledged.size) failures.push(`the rewound standby has ${rewoundFound} of ${acknowledged.size} acknowledged starts`);
    if (!fenced.refused) failures.push('the old primary was not fenced');
    if (promoted <= before) failures.push(`no timeline switch (${before} -> ${promoted})`);

    const report = {
      ports: [p1, p2] as const,
      timelines: { before, promoted, rewound: rewoundTimeline },
      acknowledged: acknowledged.size,
      acknowledgedBeforeKill: [...acks.values()].filter((a) => a.beforeKill).length,
      found: check.found,
      lost: check.acknowledged - check.found,
      partial: check.partial,
      ambiguous: ambiguous.size,
      resolvedExisting,
      resolvedCreated,
      typedRetries,
      divergedOnOldPrimary,
      fenced,
      rewound: { streaming, synchronous, found: rewoundFound, expected: acknowledged.size },
      problems: check.problems,
      failures,
      durationMs: Date.now() - started,
    };
    return {
      ...report,
      ok: failures.length === 0 && check.problems.length === 0 && report.lost === 0 && report.partial === 0 && resolvedExisting + resolvedCreated === ambiguous.size,
    };
  }
};
