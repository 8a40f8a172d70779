import type Database from 'better-sqlite3';
import { CorruptRecordError, TransactionTimeoutError, type ClaimResult, type DriverClaims } from '../../domain';
import { checked, checkedClaim, checkedClaimRows, noBarrierToClaim, claimRowOf, claimValuesOf, claimedStartIdOf, decide, historyOf, releasable, type ClaimRow } from '../../application/driverClaimRules';
import { isSqliteError, loadBetterSqlite3 } from './connection';
import { mapSqliteError } from './errors';
import { schemaGuard } from './fileIdentity';

// Driver claims (R11.2) in the authority's SQLite file (migration 0060).

const SQLITE = {
  now: "SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now_ms",
  rows: 'SELECT start_id, generation, kind, driver_id, at_ms, lease_until_ms, claim_digest FROM adapter_driver_claims WHERE start_id = ? ORDER BY generation, kind',
  insert: 'INSERT INTO adapter_driver_claims (start_id, generation, kind, driver_id, at_ms, lease_until_ms, claim_digest) VALUES (?, ?, ?, ?, ?, ?, ?)',
};

/**
 * Claims on the authority's SQLite file, through a connection of their own: the authority's
 * one connection may be inside a start transaction, and a claim must never join it.
 */
export const sqliteDriverClaims = (path: string, busyTimeoutMs = 5000): DriverClaims => {
  const db: Database.Database = new (loadBetterSqlite3())(path);
  let s: Record<keyof typeof SQLITE, Database.Statement>;
  let guard: () => void;
  try {
    db.pragma(`busy_timeout = ${Math.trunc(busyTimeoutMs)}`);
    db.pragma('foreign_keys = ON');
    s = { now: db.prepare(SQLITE.now), rows: db.prepare(SQLITE.rows), insert: db.prepare(SQLITE.insert) };
    guard = schemaGuard(db);
  } catch (e) {
    db.close();
    throw mapSqliteError(e);
  }
  const now = () => (s.now.get() as { now_ms: number }).now_ms;
  const immediate = <T>(startId: string, body: () => T): T => {
    try {
      return db
        .transaction(() => {
          guard();
          return body();
        })
        .immediate();
    } catch (e) {
      if (isSqliteError(e) && e.code.startsWith('SQLITE_BUSY')) throw new TransactionTimeoutError('busy', `driver claims are locked by another writer (${e.message})`);
      if (isSqliteError(e) && e.code === 'SQLITE_CONSTRAINT_FOREIGNKEY') throw noBarrierToClaim(startId);
      // the claim rules' trigger (0085): the history read back is not what this row follows
      if (isSqliteError(e) && e.code === 'SQLITE_CONSTRAINT_TRIGGER' && e.message.startsWith('illegal history refused')) throw new CorruptRecordError('driver claim', startId, e.message);
      throw mapSqliteError(e, startId);
    }
  };
  return {
    claim: async (startId, driverId, leaseMs) => {
      const c = checked(startId, driverId, leaseMs);
      return immediate(c.startId, (): ClaimResult => {
        const t = now();
        const d = decide(checkedClaimRows(s.rows.all(c.startId) as ClaimRow[]), t);
        if (d.holder !== undefined) return { status: 'held', holder: d.holder };
        s.insert.run(...claimValuesOf(claimRowOf(c.startId, d.next, 'claim', c.driverId, t, t + c.leaseMs)));
        return { status: 'claimed', claim: { startId: c.startId, driverId: c.driverId, generation: d.next, leaseUntilMs: t + c.leaseMs } };
      });
    },
    release: async (named) => {
      const claim = checkedClaim(named);
      immediate(claim.startId, () => {
        const t = now();
        if (releasable(checkedClaimRows(s.rows.all(claim.startId) as ClaimRow[]), claim)) s.insert.run(...claimValuesOf(claimRowOf(claim.startId, claim.generation, 'release', claim.driverId, t, t)));
      });
    },
    history: async (startId) => {
      const id = claimedStartIdOf(startId);
      let rows: ClaimRow[];
      try {
        guard();
        rows = s.rows.all(id) as ClaimRow[];
      } catch (e) {
        throw mapSqliteError(e, id);
      }
      return historyOf(checkedClaimRows(rows));
    },
    close: async () => void db.close(),
  };
};
