import { EpochMillis, Identity, decodeOrThrow, integer, strictObject } from '../domain/codecs';
import { CorruptRecordError, PreconditionError, ValidationError, type DriverClaim, type DriverClaims } from '../domain';
import { CLAIM_DIGEST_TAG, fieldsDigest } from '../domain/eventChain';
import type { StoredBarrier, VerifyProblem } from '../domain/records';

// One driver per attempt (R11.2), as a lease recorded in the store beside the barrier
// (the schema file). A claim is one insert-only row per generation; a generation
// ends by a release row or by its lease running out on the database clock. Nothing about the
// tool is stored: a start id, a driver id, a generation and two clock readings. The rules are
// here once; each backend only reads and inserts rows (its *DriverClaims.ts).

export interface ClaimRow {
  start_id: string;
  generation: number | string;
  kind: 'claim' | 'release';
  driver_id: string;
  at_ms: number | string;
  lease_until_ms: number | string;
  /** R9.2: the row's own cells, bound, so a moved time or driver is seen. */
  claim_digest: string | null;
}

export const claimDigestOf = (r: Omit<ClaimRow, 'claim_digest'>): string =>
  fieldsDigest(CLAIM_DIGEST_TAG, [r.start_id, Number(r.generation), r.kind, r.driver_id, Number(r.at_ms), Number(r.lease_until_ms)]);

/** A claim row as written: its cells and their digest, in the insert's column order. */
export const claimRowOf = (startId: string, generation: number, kind: 'claim' | 'release', driverId: string, atMs: number, leaseUntilMs: number): ClaimRow => {
  const row = { start_id: startId, generation, kind, driver_id: driverId, at_ms: atMs, lease_until_ms: leaseUntilMs };
  return { ...row, claim_digest: claimDigestOf(row) };
};

/** The insert's parameters, in the column order of every backend's INSERT. */
export const claimValuesOf = (r: ClaimRow): unknown[] => [r.start_id, r.generation, r.kind, r.driver_id, r.at_ms, r.lease_until_ms, r.claim_digest];

/**
 * The claim read fails closed (R9.3): the rows of one start are decided on only when they read
 * as `verify` reads them (claimHistoryProblems). A changed cell, a generation whose claim or
 * release row is gone, a claim taken while the one before it still held: damage, never a
 * holder or a free generation to decide on.
 */
export const checkedClaimRows = <R extends ClaimRow>(rows: readonly R[]): R[] => {
  const [first] = rows;
  if (first === undefined) return [];
  const [problem] = startClaimProblems(rows);
  if (problem !== undefined) throw new CorruptRecordError('driver claim', first.start_id, problem);
  return [...rows];
};

/**
 * R12.3: a claim's lease is the barrier's timeout plus at most this grace (time to record the
 * outcome): a driver that stops answering frees the attempt soon after its tool must have ended.
 */
export const CLAIM_LEASE_GRACE_MS = 300_000;
/** R12.3: a start is claimed at most this many times (each takeover is a generation); then it is left to recovery. */
export const MAX_CLAIM_GENERATIONS = 32;
/** The longest barrier timeout (TimeoutMs) plus the grace: no claim on any start leases longer. */
const MAX_LEASE_MS = 86_400_000 + CLAIM_LEASE_GRACE_MS;
const LeaseMs = integer('LeaseMs', 1, MAX_LEASE_MS);

/** The longest lease a claim on a start with this barrier timeout may take. */
export const leaseBoundOf = (timeoutMs: number): number => timeoutMs + CLAIM_LEASE_GRACE_MS;

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

/** A claim names a committed start: the row's key refers to its barrier (the foreign key on every backend). */
export const noBarrierToClaim = (startId: string): PreconditionError =>
  new PreconditionError('start_not_found', `no start barrier has startId ${startId}: a driver claims a committed start only (R11.2)`);

const ClaimCodec = strictObject('DriverClaim', { startId: Identity, driverId: Identity, generation: integer('Generation', 1, Number.MAX_SAFE_INTEGER), leaseUntilMs: EpochMillis });

/** The claim a release names, as `claim` returned it: anything else is bad input, nothing written. */
export const checkedClaim = (claim: DriverClaim): DriverClaim => decodeOrThrow(ClaimCodec, 'claim', claim);

export const checked = (startId: string, driverId: string, leaseMs: number) => ({
  startId: decodeOrThrow(Identity, 'startId', startId),
  driverId: decodeOrThrow(Identity, 'driverId', driverId),
  leaseMs: decodeOrThrow(LeaseMs, 'leaseMs', leaseMs),
});

/** The in-memory claims (the in-memory authority's, for unit specs); `barrierExists` plays the foreign key. */
export const memoryDriverClaims = (clock: () => number = Date.now, barrierExists: (startId: string) => boolean = () => true): DriverClaims => {
  const rows: ClaimRow[] = [];
  const of = (startId: string) => rows.filter((r) => r.start_id === startId);
  return {
    claim: async (startId, driverId, leaseMs) => {
      const c = checked(startId, driverId, leaseMs);
      if (!barrierExists(c.startId)) throw noBarrierToClaim(c.startId);
      const t = clock();
      const d = decide(checkedClaimRows(of(c.startId)), t);
      if (d.holder !== undefined) return { status: 'held', holder: d.holder };
      rows.push(claimRowOf(c.startId, d.next, 'claim', c.driverId, t, t + c.leaseMs));
      return { status: 'claimed', claim: { startId: c.startId, driverId: c.driverId, generation: d.next, leaseUntilMs: t + c.leaseMs } };
    },
    release: async (named) => {
      const claim = checkedClaim(named);
      if (releasable(checkedClaimRows(of(claim.startId)), claim)) {
        const t = clock();
        rows.push(claimRowOf(claim.startId, claim.generation, 'release', claim.driverId, t, t));
      }
    },
    history: async (startId) => historyOf(checkedClaimRows(of(claimedStartIdOf(startId)))),
    close: async () => undefined,
  };
};

/** The start id a history read names, decoded like a claim's. */
export const claimedStartIdOf = (startId: string): string => decodeOrThrow(Identity, 'startId', startId);

/** A claim row as `verify` reads it: with the database-clock time it was written, and its barrier's timeout when the barrier is there. */
export type StoredClaimRow = ClaimRow & { readonly barrier_timeout_ms?: number | string | null };

/**
 * `verify`'s reading of the claim history (R11.2, R9.2), rows in (start, generation, kind)
 * order: what `claim` and `release` can write and nothing else. Generations 1..n, one claim
 * each; a release only of a claimed generation, by its driver, stamped once (`at_ms` is its
 * lease end); a lease that ends after it starts, within the longest lease; a generation
 * claimed only once the one before it was released or ran out.
 */
export const claimHistoryProblems = (rows: readonly StoredClaimRow[]): VerifyProblem[] => {
  const byStart = new Map<string, StoredClaimRow[]>();
  for (const r of rows) (byStart.get(r.start_id) ?? byStart.set(r.start_id, []).get(r.start_id)!).push(r);
  return [...byStart].flatMap(([startId, list]) => startClaimProblems(list).map((problem): VerifyProblem => ({ kind: 'driver_claim', record: startId, problem })));
};

/** The claim rules over the rows of one start: what is wrong with them, in words. */
const startClaimProblems = (list: readonly StoredClaimRow[]): string[] => {
  const problems: string[] = [];
  const bad = (problem: string) => problems.push(problem);
  const claims = new Map<number, StoredClaimRow>();
  const releases = new Map<number, StoredClaimRow>();
  for (const r of list) {
    const generation = Number(r.generation);
    if (r.claim_digest !== claimDigestOf(r)) bad(`generation ${generation} ${String(r.kind)}: its cells do not match claim_digest`);
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
    const timeout = (c as StoredClaimRow).barrier_timeout_ms;
    if (timeout !== undefined && timeout !== null && until - at > leaseBoundOf(Number(timeout))) {
      bad(`generation ${g}: a lease of ${until - at} ms, past its barrier's timeout ${Number(timeout)} ms plus ${CLAIM_LEASE_GRACE_MS} ms`);
    }
    if (g > MAX_CLAIM_GENERATIONS) bad(`generation ${g}: a start is claimed at most ${MAX_CLAIM_GENERATIONS} times`);
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
  return problems;
};

/**
 * R9.3 / R11.2: a claim decides whether a driver may act on a start, so the start must read
 * verified first. Every claim, release and history of a backend's claim store reads the start's
 * barrier and facts as every read does (one verified read): damaged evidence is CORRUPT_RECORD,
 * never a generation to claim, and claim rows that name a start without a barrier are damage,
 * never a holder to wait for.
 */
export const claimsOnVerifiedStarts = (claims: DriverClaims, readBarrier: (startId: string) => Promise<StoredBarrier | null>): DriverClaims => {
  const requireStart = async (startId: string): Promise<StoredBarrier> => {
    const barrier = await readBarrier(startId);
    if (barrier !== null) return barrier;
    if ((await claims.history(startId)).length > 0) throw new CorruptRecordError('driver claim', startId, 'claim rows name a start that has no barrier');
    throw noBarrierToClaim(startId);
  };
  return {
    claim: async (startId, driverId, leaseMs) => {
      const c = checked(startId, driverId, leaseMs);
      const barrier = await requireStart(c.startId);
      // R12.3: bounded by the start's own timeout, and by a number of takeovers (the database refuses both too).
      const bound = leaseBoundOf(barrier.record.admission.timeoutMs);
      if (c.leaseMs > bound) {
        throw new ValidationError('driver claim', [{ path: 'leaseMs', reason: 'invalid_value', message: `a lease is at most the barrier's timeout plus ${CLAIM_LEASE_GRACE_MS} ms: ${bound} ms for start ${c.startId}` }]);
      }
      const taken = (await claims.history(c.startId)).length;
      if (taken >= MAX_CLAIM_GENERATIONS) {
        throw new PreconditionError('claims_exhausted', `start ${c.startId} was claimed ${taken} times, the most a start may be: it is left to recovery (in-doubt, resolve)`);
      }
      return claims.claim(c.startId, c.driverId, c.leaseMs);
    },
    release: async (claim) => {
      await requireStart(checkedClaim(claim).startId);
      return claims.release(claim);
    },
    history: async (startId) => {
      const rows = await claims.history(startId);
      if ((await readBarrier(claimedStartIdOf(startId))) === null && rows.length > 0) throw new CorruptRecordError('driver claim', startId, 'claim rows name a start that has no barrier');
      return rows;
    },
    close: () => claims.close(),
  };
};
