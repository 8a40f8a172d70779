import { ServerCpu, clientCpuMs } from './cpu';
import { median, percentile, sortedCopy } from './stats';

// A closed loop: `clients` concurrent callers, each awaiting its own operations back to back.
// One round = every client runs `opsPerClient` operations. Each round reports throughput,
// p50/p99 latency, CPU per operation on both sides, and the per-operation deltas of any
// counters the caller exposes (round trips, serialization retries).

export type Counters = Readonly<Record<string, number>>;

export interface RoundResult {
  readonly ops: number;
  readonly elapsedMs: number;
  readonly opsPerSec: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly clientCpuMsPerOp: number;
  readonly serverCpuMsPerOp: number | null;
  readonly perOp: Counters;
}

export interface LoopOptions {
  readonly clients: number;
  readonly opsPerClient: number;
  /** Runs one operation; `client` in [0, clients), `i` in [0, opsPerClient). */
  readonly op: (client: number, i: number) => Promise<unknown> | unknown;
  /** Sample PostgreSQL server CPU around the round (only these databases' backends, when named). */
  readonly server?: boolean | readonly string[];
  readonly counters?: () => Counters;
}

const diffPerOp = (before: Counters, after: Counters, ops: number): Counters =>
  Object.fromEntries(Object.keys(after).map((k) => [k, ((after[k] ?? 0) - (before[k] ?? 0)) / ops]));

/** One round's figures from its per-operation latencies and its totals. */
const roundResult = (latencies: Float64Array, elapsedMs: number, clientMs: number, serverMs: number | undefined, perOp: Counters): RoundResult => {
  const ops = latencies.length;
  const sorted = sortedCopy(Array.from(latencies));
  return {
    ops,
    elapsedMs,
    opsPerSec: (ops * 1000) / elapsedMs,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    clientCpuMsPerOp: clientMs / ops,
    serverCpuMsPerOp: serverMs === undefined ? null : serverMs / ops,
    perOp,
  };
};

export const runRound = async (o: LoopOptions): Promise<RoundResult> => {
  const latencies = new Float64Array(o.clients * o.opsPerClient);
  const c0 = o.counters?.() ?? {};
  const server = o.server === true ? new ServerCpu() : Array.isArray(o.server) ? new ServerCpu(undefined, o.server) : undefined;
  const client0 = clientCpuMs();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: o.clients }, async (_, client) => {
      for (let i = 0; i < o.opsPerClient; i++) {
        const s = performance.now();
        await o.op(client, i);
        latencies[client * o.opsPerClient + i] = performance.now() - s;
      }
    }),
  );
  const elapsedMs = performance.now() - t0;
  const clientMs = clientCpuMs() - client0;
  const serverMs = server?.stop();
  return roundResult(latencies, elapsedMs, clientMs, serverMs, diffPerOp(c0, o.counters?.() ?? {}, latencies.length));
};

/** Latency of a synchronous call measured one by one (prepared `get`): finer than a loop of awaits. */
export const runSyncRound = (ops: number, op: (i: number) => unknown): RoundResult => {
  const latencies = new Float64Array(ops);
  const client0 = clientCpuMs();
  const t0 = performance.now();
  for (let i = 0; i < ops; i++) {
    const s = performance.now();
    op(i);
    latencies[i] = performance.now() - s;
  }
  return roundResult(latencies, performance.now() - t0, clientCpuMs() - client0, undefined, {});
};

/** Median over rounds of every field; `rounds` keeps each round's throughput for the JSON. */
export interface Summary {
  readonly rounds: number;
  readonly opsPerRound: number;
  readonly opsPerSec: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly clientCpuMsPerOp: number;
  readonly serverCpuMsPerOp: number | null;
  readonly perOp: Counters;
  readonly opsPerSecByRound: readonly number[];
}

export const summarize = (rounds: readonly RoundResult[]): Summary => {
  const keys = [...new Set(rounds.flatMap((r) => Object.keys(r.perOp)))];
  const server = rounds.map((r) => r.serverCpuMsPerOp).filter((v): v is number => v !== null);
  return {
    rounds: rounds.length,
    opsPerRound: rounds[0]?.ops ?? 0,
    opsPerSec: median(rounds.map((r) => r.opsPerSec)),
    p50Ms: median(rounds.map((r) => r.p50Ms)),
    p99Ms: median(rounds.map((r) => r.p99Ms)),
    clientCpuMsPerOp: median(rounds.map((r) => r.clientCpuMsPerOp)),
    serverCpuMsPerOp: server.length > 0 ? median(server) : null,
    perOp: Object.fromEntries(keys.map((k) => [k, median(rounds.map((r) => r.perOp[k] ?? 0))])),
    opsPerSecByRound: rounds.map((r) => Math.round(r.opsPerSec)),
  };
};
