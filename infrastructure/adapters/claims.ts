import Database from 'better-sqlite3';
import type { Pool } from 'pg';
import { Identity, decodeOrThrow, integer } from '../../domain/codecs';
import { TransactionTimeoutError, type ClaimResult, type DriverClaim, type DriverClaims } from '../../domain';

export type { DriverClaims };
import type { RecoverableStartBarrierAuthority } from '../authority';
import type { PostgresStartBarrier } from '../postgres/store';
import type { SqliteStartBarrier } from '../sqlite/store';

// One driver per attempt (R11.2), as a lease recorded in the store beside the barrier
// (migrations 0060 / pg-0034). A claim is one insert-only row per generation; a generation
// ends by a release row or by its lease running out on the database clock. Nothing about the
// tool is stored: a start id, a driver id, a generation and two clock readings.

interface ClaimRow {
  start_id: string;
  generation: number | string;
  kind: 'claim' | 'release';
  driver_id: string;
  lease_until_ms: number | string;
}

const LeaseMs = integer('LeaseMs', 1, 86_400_000 + 3_600_000);

const claimOf = (r: ClaimRow): DriverClaim => ({ startId: r.start_id, driverId: r.driver_id, generation: Number(r.generation), leaseUntilMs: Number(r.lease_until_ms) });

/** The same decision on every backend: from the rows of one start and the database clock. */
const decide = (rows: readonly ClaimRow[], nowMs: number): { next: number; holder?: DriverClaim } => {
  let last: ClaimRow | undefined;
  const released = new Set<number>();
  for (const r of rows) {
    if (r.kind === 'release') released.add(Number(r.generation));
    else if (last === undefined || Number(r.generation) > Number(last.generation)) last = r;
  }
  if (last === undefined) return { next: 1 };
  const live = !released.has(Number(last.generation)) && Number(last.lease_until_ms) > nowMs;
  return live ? { next: Number(last.generation) + 1, holder: claimOf(last) } : { next: Number(last.generation) + 1 };
};

/** A generation is released once, and only by the driver that claimed it. */
const releasable = (rows: readonly ClaimRow[], claim: DriverClaim): boolean =>
  rows.some((r) => r.kind === 'claim' && Number(r.generation) === claim.generation && r.driver_id === claim.driverId) &&
  !rows.some((r) => r.kind === 'release' && Number(r.generation) === claim.generation);

const historyOf = (rows: readonly ClaimRow[]) => {
  const released = new Set(rows.filter((r) => r.kind === 'release').map((r) => Number(r.generation)));
  return rows.filter((r) => r.kind === 'claim').map((r) => ({ ...claimOf(r), released: released.has(Number(r.generation)) }));
};

const checked = (startId: string, driverId: string, leaseMs: number) => ({
  startId: decodeOrThrow(Identity, 'startId', startId),
  driverId: decodeOrThrow(Identity, 'driverId', driverId),
  leaseMs: decodeOrThrow(LeaseMs, 'leaseMs', leaseMs),
});

// ------------------------------------------------------------------ SQLite

const SQLITE = {
  now: "SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now_ms",
  rows: 'SELECT start_id, generation, kind, driver_id, lease_until_ms FROM adapter_driver_claims WHERE start_id = ? ORDER BY generation, kind',
  insert: 'INSERT INTO adapter_driver_claims (start_id, generation, kind, driver_id, at_ms, lease_until_ms) VALUES (?, ?, ?, ?, ?, ?)',
};

/**
 * Claims on the authority's SQLite file, through a connection of their own: the authority's
 * one connection may be inside a start transaction, and a claim must never join it.
 */
export const sqliteDriverClaims = (authority: SqliteStartBarrier, busyTimeoutMs = 5000): DriverClaims => {
  const db = new Database(authority.db.name);
  db.pragma(`busy_timeout = ${Math.trunc(busyTimeoutMs)}`);
  db.pragma('foreign_keys = ON');
  const s = { now: db.prepare(SQLITE.now), rows: db.prepare(SQLITE.rows), insert: db.prepare(SQLITE.insert) };
  const now = () => (s.now.get() as { now_ms: number }).now_ms;
  const immediate = <T>(body: () => T): T => {
    try {
      return db.transaction(body).immediate();
    } catch (e) {
      if (e instanceof Database.SqliteError && e.code.startsWith('SQLITE_BUSY')) throw new TransactionTimeoutError('busy', `driver claims are locked by another writer (${e.message})`);
      throw e;
    }
  };
  return {
    claim: async (startId, driverId, leaseMs) => {
      const c = checked(startId, driverId, leaseMs);
      return immediate((): ClaimResult => {
        const t = now();
        const d = decide(s.rows.all(c.startId) as ClaimRow[], t);
        if (d.holder !== undefined) return { status: 'held', holder: d.holder };
        s.insert.run(c.startId, d.next, 'claim', c.driverId, t, t + c.leaseMs);
        return { status: 'claimed', claim: { startId: c.startId, driverId: c.driverId, generation: d.next, leaseUntilMs: t + c.leaseMs } };
      });
    },
    release: async (claim) => {
      immediate(() => {
        const t = now();
        if (releasable(s.rows.all(claim.startId) as ClaimRow[], claim)) s.insert.run(claim.startId, claim.generation, 'release', claim.driverId, t, t);
      });
    },
    history: async (startId) => historyOf(s.rows.all(decodeOrThrow(Identity, 'startId', startId)) as ClaimRow[]),
    close: async () => void db.close(),
  };
};

// ------------------------------------------------------------------ PostgreSQL

const PG = {
  rows: 'SELECT start_id, generation, kind, driver_id, lease_until_ms FROM ql3.adapter_driver_claims WHERE start_id = $1 ORDER BY generation, kind',
  now: "SELECT (extract(epoch FROM transaction_timestamp()) * 1000)::bigint AS now_ms",
  insert: 'INSERT INTO ql3.adapter_driver_claims (start_id, generation, kind, driver_id, at_ms, lease_until_ms) VALUES ($1, $2, $3, $4, $5, $6)',
};

const isUniqueViolation = (e: unknown): boolean => typeof e === 'object' && e !== null && (e as { code?: unknown }).code === '23505';

/**
 * Claims on the authority's pool. Each claim is one short transaction; two drivers that both
 * read "free" race on the primary key (start, generation): the loser re-reads and finds the
 * winner's live lease.
 */
export const postgresDriverClaims = (authority: Pick<PostgresStartBarrier, 'pool'>): DriverClaims => {
  const pool: Pool = authority.pool;
  const tx = async <T>(body: (q: (text: string, values: unknown[]) => Promise<unknown[]>) => Promise<T>): Promise<T> => {
    const client = await pool.connect();
    try {
      await client.query("BEGIN; SET LOCAL statement_timeout = '5s'; SET LOCAL lock_timeout = '2s'");
      const result = await body(async (text, values) => (await client.query(text, values)).rows);
      await client.query('COMMIT');
      return result;
    } catch (e) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw e;
    } finally {
      client.release();
    }
  };
  const attempt = (c: ReturnType<typeof checked>) =>
    tx(async (q): Promise<ClaimResult> => {
      const [clock] = (await q(PG.now, [])) as { now_ms: string }[];
      const t = Number(clock!.now_ms);
      const d = decide((await q(PG.rows, [c.startId])) as ClaimRow[], t);
      if (d.holder !== undefined) return { status: 'held', holder: d.holder };
      await q(PG.insert, [c.startId, d.next, 'claim', c.driverId, t, t + c.leaseMs]);
      return { status: 'claimed', claim: { startId: c.startId, driverId: c.driverId, generation: d.next, leaseUntilMs: t + c.leaseMs } };
    });
  return {
    claim: async (startId, driverId, leaseMs) => {
      const c = checked(startId, driverId, leaseMs);
      // Bounded: a lost primary-key race is re-read once per racer that beat us.
      for (let i = 0; i < 4; i++) {
        try {
          return await attempt(c);
        } catch (e) {
          if (!isUniqueViolation(e)) throw e;
        }
      }
      throw new TransactionTimeoutError('lock', `driver claim on ${c.startId} lost its race four times`);
    },
    release: async (claim) => {
      await tx(async (q) => {
        const [clock] = (await q(PG.now, [])) as { now_ms: string }[];
        if (releasable((await q(PG.rows, [claim.startId])) as ClaimRow[], claim)) await q(PG.insert, [claim.startId, claim.generation, 'release', claim.driverId, Number(clock!.now_ms), Number(clock!.now_ms)]);
      }).catch((e: unknown) => {
        // A release racing another release of the same generation: the generation is released.
        if (!isUniqueViolation(e)) throw e;
      });
    },
    history: async (startId) => historyOf((await pool.query<ClaimRow>(PG.rows, [decodeOrThrow(Identity, 'startId', startId)])).rows),
    close: async () => undefined,
  };
};

// ------------------------------------------------------------------ memory (unit specs)

export const memoryDriverClaims = (clock: () => number = Date.now): DriverClaims => {
  const rows: ClaimRow[] = [];
  const of = (startId: string) => rows.filter((r) => r.start_id === startId);
  return {
    claim: async (startId, driverId, leaseMs) => {
      const c = checked(startId, driverId, leaseMs);
      const t = clock();
      const d = decide(of(c.startId), t);
      if (d.holder !== undefined) return { status: 'held', holder: d.holder };
      rows.push({ start_id: c.startId, generation: d.next, kind: 'claim', driver_id: c.driverId, lease_until_ms: t + c.leaseMs });
      return { status: 'claimed', claim: { startId: c.startId, driverId: c.driverId, generation: d.next, leaseUntilMs: t + c.leaseMs } };
    },
    release: async (claim) => {
      if (releasable(of(claim.startId), claim)) {
        rows.push({ start_id: claim.startId, generation: claim.generation, kind: 'release', driver_id: claim.driverId, lease_until_ms: clock() });
      }
    },
    history: async (startId) => historyOf(of(startId)),
    close: async () => undefined,
  };
};

const MEMORY_CLAIMS = new WeakMap<object, DriverClaims>();

/** The claims that live beside an authority's own records. */
export const driverClaimsOf = (authority: RecoverableStartBarrierAuthority): DriverClaims => {
  switch (authority.backend) {
    case 'sqlite':
      return sqliteDriverClaims(authority as unknown as SqliteStartBarrier);
    case 'postgres':
      return postgresDriverClaims(authority as unknown as PostgresStartBarrier);
    case 'memory': {
      // One claim table per in-memory store, like the row table a real store has.
      let claims = MEMORY_CLAIMS.get(authority);
      if (claims === undefined) MEMORY_CLAIMS.set(authority, (claims = memoryDriverClaims()));
      return claims;
    }
    default: {
      const _exhaustive: never = authority.backend;
      throw new Error(`unknown backend ${String(_exhaustive)}`);
    }
  }
};
