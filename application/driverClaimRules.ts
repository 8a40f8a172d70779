import { Identity, decodeOrThrow, integer } from '../domain/codecs';
import type { ClaimResult, DriverClaim, DriverClaims } from '../domain';
import type { VerifyProblem } from './authority';

// One driver per attempt (R11.2), as a lease recorded in the store beside the barrier
// (migrations 0060 / pg-0034). A claim is one insert-only row per generation; a generation
// ends by a release row or by its lease running out on the database clock. Nothing about the
// tool is stored: a start id, a driver id, a generation and two clock readings. The rules are
// here once; each backend only reads and inserts rows (its *DriverClaims.ts).

export interface ClaimRow {
  start_id: string;
  generation: number | string;
  kind: 'claim' | 'release';
  driver_id: string;
  lease_until_ms: number | string;
}

const MAX_LEASE_MS = 86_400_000 + 3_600_000;
const LeaseMs = integer('LeaseMs', 1, MAX_LEASE_MS);

export const claimOf = (r: ClaimRow): DriverClaim => ({ startId: r.start_id, driverId: r.driver_id, generation: Number(r.generation), leaseUntilMs: Number(r.lease_until_ms) });

/** The same decision on every backend: from the rows of one start and the database clock. */
export const decide = (rows: readonly ClaimRow[], nowMs: number): { next: number; holder?: DriverClaim } => {
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
export const releasable = (rows: readonly ClaimRow[], claim: DriverClaim): boolean =>
  rows.some((r) => r.kind === 'claim' && Number(r.generation) === claim.generation && r.driver_id === claim.driverId) &&
  !rows.some((r) => r.kind === 'release' && Number(r.generation) === claim.generation);

export const historyOf = (rows: readonly ClaimRow[]) => {
  const released = new Set(rows.filter((r) => r.kind === 'release').map((r) => Number(r.generation)));
  return rows.filter((r) => r.kind === 'claim').map((r) => ({ ...claimOf(r), released: released.has(Number(r.generation)) }));
};

export const checked = (startId: string, driverId: string, leaseMs: number) => ({
  startId: decodeOrThrow(Identity, 'startId', startId),
  driverId: decodeOrThrow(Identity, 'driverId', driverId),
  leaseMs: decodeOrThrow(LeaseMs, 'leaseMs', leaseMs),
});

/** The in-memory claims (the in-memory authority's, for unit specs). */
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

/** The start id a history read names, decoded like a claim's. */
export const claimedStartIdOf = (startId: string): string => decodeOrThrow(Identity, 'startId', startId);

/** A claim row as `verify` reads it: with the database-clock time it was written. */
export interface StoredClaimRow extends ClaimRow {
  readonly at_ms: number | string;
}

/**
 * `verify`'s reading of the claim history (R11.2, R9.2), rows in (start, generation, kind)
 * order: what `claim` and `release` can write and nothing else. Generations 1..n, one claim
 * each; a release only of a claimed generation, by its driver, stamped once (`at_ms` is its
 * lease end); a lease that ends after it starts, within the longest lease; a generation
 * claimed only once the one before it was released or ran out.
 */
export const claimHistoryProblems = (rows: readonly StoredClaimRow[]): VerifyProblem[] => {
  const problems: VerifyProblem[] = [];
  const byStart = new Map<string, StoredClaimRow[]>();
  for (const r of rows) (byStart.get(r.start_id) ?? byStart.set(r.start_id, []).get(r.start_id)!).push(r);
  for (const [startId, list] of byStart) {
    const bad = (problem: string) => problems.push({ kind: 'driver_claim', record: startId, problem });
    const claims = new Map<number, StoredClaimRow>();
    const releases = new Map<number, StoredClaimRow>();
    for (const r of list) {
      const generation = Number(r.generation);
      if (r.kind !== 'claim' && r.kind !== 'release') bad(`a claim row of kind ${String(r.kind)}`);
      else if ((r.kind === 'claim' ? claims : releases).has(generation)) bad(`two ${r.kind} rows for generation ${generation}`);
      else (r.kind === 'claim' ? claims : releases).set(generation, r);
    }
    const generations = [...claims.keys()].sort((x, y) => x - y);
    generations.forEach((g, i) => {
      if (g !== i + 1) bad(`claim generations are ${generations.join(', ')}, not 1..${generations.length}`);
    });
    for (const [g, c] of claims) {
      const at = Number(c.at_ms);
      const until = Number(c.lease_until_ms);
      if (!(until > at && until - at <= MAX_LEASE_MS)) bad(`generation ${g}: a lease from ${at} to ${until}`);
      const previous = claims.get(g - 1);
      if (previous !== undefined) {
        const ended = Math.min(Number(releases.get(g - 1)?.at_ms ?? Infinity), Number(previous.lease_until_ms));
        if (at < ended) bad(`generation ${g} claimed at ${at}, before generation ${g - 1} ended at ${ended}`);
      }
    }
    for (const [g, r] of releases) {
      const c = claims.get(g);
      if (c === undefined) bad(`a release of generation ${g}, which was never claimed`);
      else if (r.driver_id !== c.driver_id) bad(`generation ${g} released by ${r.driver_id}, claimed by ${c.driver_id}`);
      else if (Number(r.at_ms) !== Number(r.lease_until_ms) || Number(r.at_ms) < Number(c.at_ms)) bad(`generation ${g}: a release stamped ${String(r.at_ms)}/${String(r.lease_until_ms)} for a claim at ${String(c.at_ms)}`);
    }
  }
  return problems;
};
