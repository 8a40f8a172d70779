import type Database from 'better-sqlite3';
import { CorruptRecordError, type ClaimResult, type DriverClaims } from '../../domain';
import { checked, checkedClaim, checkedClaimRows, noBarrierToClaim, claimRowOf, claimValuesOf, claimedStartIdOf, decide, historyOf, releasable, type ClaimRow } from '../../application/driverClaimRules';
import { isSqliteError } from './connection';
import { mapSqliteError } from './errors';

// Driver claims (R11.2) in the authority's SQLite file (adapter_driver_claims), on its one connection.

const SQLITE = {
  now: "SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now_ms",
  rows: 'SELECT start_id, generation, kind, driver_id, at_ms, lease_until_ms, claim_digest FROM adapter_driver_claims WHERE start_id = ? ORDER BY generation, kind',
  insert: 'INSERT INTO adapter_driver_claims (start_id, generation, kind, driver_id, at_ms, lease_until_ms, claim_digest) VALUES (?, ?, ?, ?, ?, ?, ?)',
};

/** The authority's own transactions (its `write` and `read`: one operation at a time, errors mapped). */
export interface ClaimRunner {
  /** `BEGIN IMMEDIATE` on the authority's connection, after any operation in flight. */
  write<T>(body: () => Promise<T>): Promise<T>;
  read<T>(body: () => T): Promise<T>;
}

/**
 * Claims on the authority's own connection (the ADR's single operation authority): each claim
 * or release is one `BEGIN IMMEDIATE` queued behind whatever the authority is doing, never a
 * second connection to the file.
 */
export const sqliteDriverClaims = (db: Database.Database, run: ClaimRunner): DriverClaims => {
  let prepared: Record<keyof typeof SQLITE, Database.Statement> | undefined;
  const s = () => (prepared ??= { now: db.prepare(SQLITE.now), rows: db.prepare(SQLITE.rows), insert: db.prepare(SQLITE.insert) });
  const now = () => (s().now.get() as { now_ms: number }).now_ms;
  const immediate = <T>(startId: string, body: () => T): Promise<T> =>
    run.write(async () => {
      try {
        return body();
      } catch (e) {
        if (isSqliteError(e) && e.code === 'SQLITE_CONSTRAINT_FOREIGNKEY') throw noBarrierToClaim(startId);
        // the claim rules' trigger: the history read back is not what this row follows
        if (isSqliteError(e) && e.code === 'SQLITE_CONSTRAINT_TRIGGER' && e.message.startsWith('illegal history refused')) throw new CorruptRecordError('driver claim', startId, e.message);
        throw mapSqliteError(e, startId);
      }
    });
  return {
    claim: async (startId, driverId, leaseMs) => {
      const c = checked(startId, driverId, leaseMs);
      return immediate(c.startId, (): ClaimResult => {
        const t = now();
        const d = decide(checkedClaimRows(s().rows.all(c.startId) as ClaimRow[]), t);
        if (d.holder !== undefined) return { status: 'held', holder: d.holder };
        s().insert.run(...claimValuesOf(claimRowOf(c.startId, d.next, 'claim', c.driverId, t, t + c.leaseMs)));
        return { status: 'claimed', claim: { startId: c.startId, driverId: c.driverId, generation: d.next, leaseUntilMs: t + c.leaseMs } };
      });
    },
    release: async (named) => {
      const claim = checkedClaim(named);
      await immediate(claim.startId, () => {
        const t = now();
        if (releasable(checkedClaimRows(s().rows.all(claim.startId) as ClaimRow[]), claim)) s().insert.run(...claimValuesOf(claimRowOf(claim.startId, claim.generation, 'release', claim.driverId, t, t)));
      });
    },
    history: async (startId) => {
      const id = claimedStartIdOf(startId);
      return historyOf(checkedClaimRows(await run.read(() => s().rows.all(id) as ClaimRow[])));
    },
    // the connection is the authority's: closing the claims leaves it open
    close: async () => undefined,
  };
};
