import { createInterface } from 'node:readline';
import pg from 'pg';
import { getPostgreSQLEventStore } from '@event-driven-io/emmett-postgresql';
import { buildScenario } from '../../domain/scenario';
import { seededRunOf } from '../lib/startRows';
import { ServerCpu, clientCpuMs } from '../lib/cpu';
import { percentile, sortedCopy } from '../lib/stats';

// The peer, in its own process (emmett-postgresql changes pg's global type parsers): append the
// same five start events to `run-<id>` with an expected stream version, N concurrent clients on
// distinct streams. Driven over stdin/stdout, one JSON line per request, so its rounds
// interleave with the parent's. argv: <database url> <max clients>

type Query = (...args: unknown[]) => unknown;
const counters = { roundTrips: 0 };

// Count round trips as the parent does; and size the pool for the largest client count
// (emmett's own pool takes pg's default of 10 connections).
const maxClients = Number(process.argv[3] ?? 16);
const proto = pg.Client.prototype as unknown as { query: Query };
const original = proto.query;
proto.query = function (this: unknown, ...args: unknown[]) {
  counters.roundTrips++;
  return original.apply(this, args);
};
const BasePool = pg.Pool;
(pg as unknown as { Pool: unknown }).Pool = class extends BasePool {
  constructor(options?: pg.PoolConfig) {
    super({ ...options, max: maxClients, idleTimeoutMillis: 500 });
  }
};

interface Request {
  readonly clients: number;
  readonly opsPerClient: number;
  readonly tag: string;
}

const main = async (): Promise<void> => {
  const store = getPostgreSQLEventStore(process.argv[2]!);
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (line.trim() === '') continue;
    const req = JSON.parse(line) as Request;
    const total = req.clients * req.opsPerClient;
    // The Run streams exist first, with their three lifecycle events (stream version 3).
    const runs = Array.from({ length: total }, (_, i) => seededRunOf(buildScenario({ prefix: `${req.tag}-${i}` }), 0));
    const eventsOf = (i: number) => {
      const r = runs[i]!;
      return { stream: r.stream.stream_id, lifecycle: r.events.slice(0, 3), facts: r.start.facts.map((e) => ({ type: e.type, data: e.data })) };
    };
    for (let i = 0; i < total; i++) {
      const e = eventsOf(i);
      await store.appendToStream(e.stream, e.lifecycle.map((x) => ({ type: x.event_type, data: JSON.parse(x.data_json) as Record<string, unknown> })));
    }
    // Open the pool's connections before the clock starts, as the parent does for its pools.
    await Promise.all(Array.from({ length: req.clients }, (_, i) => store.streamExists(eventsOf(i).stream)));
    const latencies = new Float64Array(total);
    const rt0 = counters.roundTrips;
    const server = new ServerCpu();
    const client0 = clientCpuMs();
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: req.clients }, async (_, c) => {
        for (let k = 0; k < req.opsPerClient; k++) {
          const i = c * req.opsPerClient + k;
          const e = eventsOf(i);
          const s = performance.now();
          await store.appendToStream(e.stream, e.facts as never, { expectedStreamVersion: 3n });
          latencies[i] = performance.now() - s;
        }
      }),
    );
    const elapsedMs = performance.now() - t0;
    const clientMs = clientCpuMs() - client0;
    const serverMs = server.stop();
    const sorted = sortedCopy(Array.from(latencies));
    process.stdout.write(
      `${JSON.stringify({
        ops: total,
        elapsedMs,
        opsPerSec: (total * 1000) / elapsedMs,
        p50Ms: percentile(sorted, 50),
        p99Ms: percentile(sorted, 99),
        clientCpuMsPerOp: clientMs / total,
        serverCpuMsPerOp: serverMs / total,
        perOp: { roundTrips: (counters.roundTrips - rt0) / total },
      })}\n`,
    );
  }
  await store.close();
};

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
