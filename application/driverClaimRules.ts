import { Identity, decodeOrThrow, integer } from '../domain/codecs';
import type { ClaimResult, DriverClaim, DriverClaims } from '../domain';

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

const LeaseMs = integer('LeaseMs', 1, 86_400_000 + 3_600_000);

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
