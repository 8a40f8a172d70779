import { ValidationError } from '../../domain';

// `--older-than 30s | 5m | 2h | 1d | 1h30m | 500ms`: whole numbers with a unit, summed.

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION = /^(?:\d+(?:ms|s|m|h|d))+$/;
const PART = /(\d+)(ms|s|m|h|d)/g;

export const parseDuration = (text: string): number => {
  const invalid = () =>
    new ValidationError('duration', [{ path: '--older-than', reason: 'invalid_value', message: `"${text}" is not a duration like 30s, 5m, 2h, 1d or 1h30m` }]);
  if (!DURATION.test(text)) throw invalid();
  let total = 0;
  for (const [, n, unit] of text.matchAll(PART)) total += Number(n) * UNIT_MS[unit!]!;
  if (!Number.isSafeInteger(total)) throw invalid();
  return total;
};

/** 3725000 -> "1h2m5s": for humans reading `in-doubt`. */
export const formatDuration = (ms: number): string => {
  if (ms < 1_000) return `${Math.max(0, Math.trunc(ms))}ms`;
  let rest = Math.trunc(ms / 1_000);
  const parts: string[] = [];
  for (const [unit, size] of [['d', 86_400], ['h', 3_600], ['m', 60], ['s', 1]] as const) {
    const n = Math.trunc(rest / size);
    rest -= n * size;
    if (n > 0 || (unit === 's' && parts.length === 0)) parts.push(`${n}${unit}`);
  }
  return parts.join('');
};
