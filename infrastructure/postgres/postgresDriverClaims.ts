import type { Pool, PoolClient } from 'pg';
import { CorruptRecordError, TransactionTimeoutError, type ClaimResult, type DriverClaims } from '../../domain';
import { checked, checkedClaim, checkedClaimRows, noBarrierToClaim, claimRowOf, claimValuesOf, claimedStartIdOf, decide, historyOf, releasable, type ClaimRow } from '../../application/driverClaimRules';
import { SQLSTATE, isUniqueViolation, mapPgError, sqlStateOf, unavailableReasonOf } from './errors';
import type { PostgresTimeouts } from './transactions';

// Driver claims (R11.2) in schema ql3, on the authority's pool.

const PG = {
  rows: 'SELECT start_id, generation, kind, driver_id, at_ms, lease_until_ms, claim_digest FROM ql3.adapter_driver_claims WHERE start_id = $1 ORDER BY generation, kind',
  now: "SELECT (extract(epoch FROM transaction_timestamp()) * 1000)::bigint AS now_ms",
  insert: 'INSERT INTO ql3.adapter_driver_claims (start_id, generation, kind, driver_id, at_ms, lease_until_ms, claim_digest) VALUES ($1, $2, $3, $4, $5, $6, $7)',
};

/**
 * Claims on the authority's pool. Each claim is one short transaction; two drivers that both
 * read "free" race on the primary key (start, generation): the loser re-reads and finds the
 * winner's live lease. The authority's timeouts bound each statement, each lock wait and the
 * whole claim (R13.1), as they bound a start.
 */
export const postgresDriverClaims = (pool: Pool, timeouts: Pick<PostgresTimeouts, 'statementMs' | 'lockMs' | 'deadlineMs'>): DriverClaims => {
  const settings = `BEGIN; SET LOCAL statement_timeout = ${Math.trunc(timeouts.statementMs)}; SET LOCAL lock_timeout = ${Math.trunc(timeouts.lockMs)}`;
  const tx = async <T>(startId: string, body: (q: (text: string, values: unknown[]) => Promise<unknown[]>) => Promise<T>): Promise<T> => {
    let client: PoolClient;
    try {
      client = await pool.connect();
    } catch (e) {
      throw mapPgError(e);
    }
    let broken = false;
    try {
      await client.query(settings);
      const result = await body(async (text, values) => (await client.query(text, values)).rows);
      await client.query('COMMIT');
      return result;
    } catch (e) {
      // a read-only or lost server: the connection is dropped, never pooled again (R13.3)
      broken = unavailableReasonOf(e) !== undefined;
      if (!broken) await client.query('ROLLBACK').catch(() => undefined);
      if (sqlStateOf(e) === SQLSTATE.foreignKeyViolation) throw noBarrierToClaim(startId);
      // the claim rules' trigger: the history read back is not what this row follows
      if (sqlStateOf(e) === SQLSTATE.historyRefused) throw new CorruptRecordError('driver claim', startId, e instanceof Error ? e.message : String(e));
      if (isUniqueViolation(e)) throw e; // the caller re-reads
      throw mapPgError(e);
    } finally {
      client.release(broken);
    }
  };
  const attempt = (c: ReturnType<typeof checked>) =>
    tx(c.startId, async (q): Promise<ClaimResult> => {
      const [clock] = (await q(PG.now, [])) as { now_ms: string }[];
      const t = Number(clock!.now_ms);
      const d = decide(checkedClaimRows((await q(PG.rows, [c.startId])) as ClaimRow[]), t);
      if (d.holder !== undefined) return { status: 'held', holder: d.holder };
      await q(PG.insert, claimValuesOf(claimRowOf(c.startId, d.next, 'claim', c.driverId, t, t + c.leaseMs)));
      return { status: 'claimed', claim: { startId: c.startId, driverId: c.driverId, generation: d.next, leaseUntilMs: t + c.leaseMs } };
    });
  return {
    claim: async (startId, driverId, leaseMs) => {
      const c = checked(startId, driverId, leaseMs);
      const deadlineAt = Date.now() + timeouts.deadlineMs;
      // Bounded: a lost primary-key race is re-read once per racer that beat us, within the deadline.
      for (let i = 0; i < 4; i++) {
        if (Date.now() >= deadlineAt) throw new TransactionTimeoutError('deadline', `driver claim on ${c.startId} did not finish within its deadline of ${timeouts.deadlineMs} ms (timeouts.deadlineMs); nothing more was written`);
        try {
          return await attempt(c);
        } catch (e) {
          if (!isUniqueViolation(e)) throw e;
        }
      }
      throw new TransactionTimeoutError('lock', `driver claim on ${c.startId} lost its race four times`);
    },
    release: async (named) => {
      const claim = checkedClaim(named);
      await tx(claim.startId, async (q) => {
        const [clock] = (await q(PG.now, [])) as { now_ms: string }[];
        const t = Number(clock!.now_ms);
        if (releasable(checkedClaimRows((await q(PG.rows, [claim.startId])) as ClaimRow[]), claim)) await q(PG.insert, claimValuesOf(claimRowOf(claim.startId, claim.generation, 'release', claim.driverId, t, t)));
      }).catch((e: unknown) => {
        // A release racing another release of the same generation: the generation is released.
        if (!isUniqueViolation(e)) throw e;
      });
    },
    history: async (startId) => {
      const id = claimedStartIdOf(startId);
      const rows = await pool.query<ClaimRow>(PG.rows, [id]).catch((e: unknown) => {
        throw mapPgError(e);
      });
      return historyOf(checkedClaimRows(rows.rows));
    },
    close: async () => undefined,
  };
};
