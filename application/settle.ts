import { setTimeout as sleep } from 'node:timers/promises';
import { ConcurrencyExhaustedError, StoreUnavailableError, TransactionTimeoutError } from '../domain';
import type { StartBarrierAuthority } from './authority';
import type { PrepareResult } from '../domain/records';

// R13.3: a start whose answer was lost (a switch, a dropped connection, a read-only standby)
// may or may not have committed. Replaying the same command is the one way to know (R4.2): an
// exact replay answers `existing` if it had, and writes it (`created`) if not. This is that
// replay, bounded, so callers do not each write their own loop.

export interface SettleOptions {
  /** How long to keep replaying, in ms (default 30000): past it, the last error is thrown. */
  readonly deadlineMs?: number;
  /** The first pause between replays, in ms (default 50); each further one doubles, up to 1000. */
  readonly pauseMs?: number;
}

export const DEFAULT_SETTLE_DEADLINE_MS = 30_000;

/**
 * Whether a failed start is worth replaying: the store was unavailable (but not closed by the
 * caller), or a bound of the operation ran out. Everything else is an answer (a conflict, a
 * precondition, bad input, damage) that a replay would only repeat.
 */
export const isSettleable = (e: unknown): boolean =>
  (e instanceof StoreUnavailableError && e.reason !== 'closed') || e instanceof TransactionTimeoutError || e instanceof ConcurrencyExhaustedError;

/**
 * `prepare(command)`, replayed after every settleable failure until it answers `created` or
 * `existing` or the deadline passes (then the last error, typed as it was). The command must be
 * the same one (same identities and content) as the start whose answer was lost.
 */
export const settleStart = async (authority: Pick<StartBarrierAuthority, 'barriers'>, command: Parameters<StartBarrierAuthority['barriers']['prepare']>[0], options: SettleOptions = {}): Promise<PrepareResult> => {
  const deadlineMs = options.deadlineMs ?? DEFAULT_SETTLE_DEADLINE_MS;
  const firstPause = options.pauseMs ?? 50;
  if (!Number.isSafeInteger(deadlineMs) || deadlineMs < 0) throw new RangeError(`deadlineMs must be a whole number of ms, got ${deadlineMs}`);
  if (!Number.isSafeInteger(firstPause) || firstPause < 1) throw new RangeError(`pauseMs must be a whole number of ms above 0, got ${firstPause}`);
  const end = Date.now() + deadlineMs;
  for (let pause = firstPause; ; pause = Math.min(pause * 2, 1000)) {
    try {
      return await authority.barriers.prepare(command);
    } catch (e) {
      if (!isSettleable(e)) throw e;
      const left = end - Date.now();
      if (left <= 0) throw e;
      await sleep(Math.min(pause, left));
    }
  }
};
