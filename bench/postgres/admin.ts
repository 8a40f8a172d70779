import { randomBytes } from 'node:crypto';
import { Client, Pool, type PoolClient } from 'pg';

// Fresh databases of our own on the shared server: created per figure group, dropped after.
// Names are ours (random hex), validated before they reach DDL, which cannot bind them.

const NAME = /^sbbench_[0-9a-f]{12}$/;

export const urlOf = (adminUrl: string, database: string): string => {
  const url = new URL(adminUrl);
  url.pathname = `/${database}`;
  return url.toString();
};

const admin = async <T>(adminUrl: string, body: (c: Client) => Promise<T>): Promise<T> => {
  const c = new Client({ connectionString: adminUrl, connectionTimeoutMillis: 5000 });
  await c.connect();
  try {
    return await body(c);
  } finally {
    await c.end();
  }
};

export interface BenchDatabase {
  readonly name: string;
  readonly url: string;
  drop(): Promise<void>;
}

export const createDatabase = async (adminUrl: string): Promise<BenchDatabase> => {
  const name = `sbbench_${randomBytes(6).toString('hex')}`;
  if (!NAME.test(name)) throw new Error(`refusing database name ${name}`);
  await admin(adminUrl, (c) => c.query(`CREATE DATABASE "${name}"`));
  return {
    name,
    url: urlOf(adminUrl, name),
    drop: () => admin(adminUrl, async (c) => void (await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`))),
  };
};

/** Round trips and serialization failures seen by every connection of a pool. */
export interface PoolCounters {
  roundTrips: number;
  retries: number;
  /** Bytes the server sent (replies, as they arrive on the socket). */
  bytesIn: number;
}

type Query = (...args: unknown[]) => unknown;

/**
 * A pool whose connections count every query they send (one query = one round trip with pg)
 * and every 40001/40P01 they receive (a serialization retry of the product's transaction).
 */
export const countingPool = (url: string, max: number, extra: Record<string, unknown> = {}): { pool: Pool; counters: PoolCounters } => {
  const counters: PoolCounters = { roundTrips: 0, retries: 0, bytesIn: 0 };
  const pool = new Pool({ connectionString: url, max, ...extra });
  pool.on('error', () => undefined);
  pool.on('connect', (client: PoolClient) => {
    const stream = (client as unknown as { connection?: { stream?: NodeJS.EventEmitter } }).connection?.stream;
    stream?.on('data', (chunk: Buffer) => {
      counters.bytesIn += chunk.length;
    });
    const target = client as unknown as { query: Query };
    const original = target.query.bind(client) as Query;
    target.query = (...args: unknown[]) => {
      counters.roundTrips++;
      const result = original(...args);
      if (result instanceof Promise) {
        result.catch((e: unknown) => {
          const code = (e as { code?: unknown }).code;
          if (code === '40001' || code === '40P01') counters.retries++;
        });
      }
      return result;
    };
  });
  return { pool, counters };
};
