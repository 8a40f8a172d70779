import type { Summary } from './measure';
import type { BytesFigure, Figure, Target } from './report';

/** Sizes of one bench run: `--quick` is a CI smoke test only; the default is the real run. */
export interface Sizes {
  readonly quick: boolean;
  readonly rounds: number;
  /** SQLite starts per round and figure. */
  readonly sqliteOps: number;
  /** PostgreSQL operations per client per round. */
  readonly pgOpsPerClient: number;
  readonly pgClients: readonly number[];
  /** Operations per round for latency-only figures (replay, SELECT, get). */
  readonly latencyOps: number;
  readonly scaleSmall: number;
  readonly scaleLarge: number;
  readonly scaleOps: number;
  readonly streamShort: number;
  readonly streamLong: number;
  readonly rssStarts: number;
  /** Starts per subject of the edge section, and its idle wait (the simulated hour). */
  readonly edgeStarts: number;
  readonly edgeIdleMs: number;
  /** Seconds of each pgbench round. */
  readonly pgbenchSeconds: number;
  /** Started Runs already stored in the PostgreSQL product database (history). */
  readonly pgHistory: number;
}

export const QUICK: Sizes = {
  quick: true,
  rounds: 1,
  sqliteOps: 40,
  pgOpsPerClient: 5,
  pgClients: [1, 4, 8, 16],
  latencyOps: 40,
  scaleSmall: 1_000,
  scaleLarge: 2_000,
  scaleOps: 40,
  streamShort: 10,
  streamLong: 400,
  rssStarts: 400,
  edgeStarts: 200,
  edgeIdleMs: 500,
  pgbenchSeconds: 1,
  pgHistory: 200,
};

export const DEFAULT: Sizes = {
  quick: false,
  rounds: 3,
  sqliteOps: 500,
  pgOpsPerClient: 0, // derived per client count, see pgOpsFor
  pgClients: [1, 4, 8, 16],
  latencyOps: 300,
  scaleSmall: 1_000,
  scaleLarge: 1_000_000,
  scaleOps: 500,
  streamShort: 10,
  streamLong: 10_000,
  rssStarts: 100_000,
  edgeStarts: 10_000,
  edgeIdleMs: 30_000,
  pgbenchSeconds: 3,
  pgHistory: 10_000,
};

/** PostgreSQL operations per client and round: about 480 per round in total, at least 30 each. */
export const pgOpsFor = (sizes: Sizes, clients: number): number =>
  sizes.quick ? sizes.pgOpsPerClient : Math.max(30, Math.round(480 / clients));

export interface BenchContext {
  readonly sizes: Sizes;
  readonly tmp: string;
  readonly cacheDir: string;
  readonly figures: Figure[];
  readonly targets: Target[];
  /** Extra figures for the JSON (seed times, RSS samples, database sizes). */
  readonly extra: Record<string, unknown>;
  /** Commit floors measured so far, by key (`sqlite-NORMAL`, `pg-1`), for figures measured elsewhere. */
  readonly floors: Record<string, Summary>;
  /** Bytes per start (table growth and WAL) beside the canonical bytes of the records. */
  readonly bytes: BytesFigure[];
  /** Run recovery.verify() over the whole large seeded store (`--no-store-verify` skips it). */
  readonly storeVerify: boolean;
  log(message: string): void;
}
