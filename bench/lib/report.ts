import type { Summary } from './measure';

// What the bench prints and writes: one row per measured figure, with the limits beside it
// (commit floor, CPU on both sides, retries, round trips), and the issue's targets as ratios.

export interface Figure {
  readonly id: string;
  readonly section: string;
  readonly label: string;
  readonly clients: number;
  readonly summary: Summary;
  /** The commit floor measured in the same rounds, under the same conditions. */
  readonly floor?: Summary;
  readonly note?: string;
}

/** Bytes one start adds, per start, with the canonical bytes of the five records it commits. */
export interface BytesFigure {
  readonly id: string;
  readonly label: string;
  readonly starts: number;
  readonly tableBytes: number;
  readonly walBytes: number;
  readonly canonicalBytes: number;
  /** Per start: what each table and index grew by (see lib/bytes.ts). */
  readonly byObject?: Readonly<Record<string, { readonly bytes: number; readonly payload?: number }>>;
}

export interface Target {
  readonly id: string;
  readonly text: string;
  /** Measured ratio (higher is better unless `lowerIsBetter`). */
  readonly ratio: number;
  readonly required: number;
  readonly lowerIsBetter?: boolean;
  /** Printed after ratio and required instead of ×, when the figure is not a ratio. */
  readonly unit?: string;
  /** Decimals printed for ratio and required (2 unless said): 0 for a count. */
  readonly digits?: number;
  readonly detail: string;
  /** When missed: why, with the measurement that shows it. */
  readonly why?: string;
  readonly met: boolean;
}

/**
 * The targets a start is held to, in the order the table prints them: each met, or missed with
 * the measurement that says why. Ratios measured unreachable by construction are not targets
 * (pgbench and emmett stay as figures to compare with).
 */
export const TARGET_ORDER = [
  'floor.pg.start.8',
  'floor.pg.start.1',
  'floor.pg.replay',
  'floor.sqlite.replay',
  'floor.sqlite.full',
  'floor.verify',
  'floor.bytes.pg',
  'floor.bytes.sqlite',
  'scale.barriers',
  'scale.stream',
  'scale.stream.pg',
  'rss.max',
  'rss.growth',
] as const;

/** The targets in TARGET_ORDER, then any other check a section counts (failed prepares, in-doubt pages). */
export const inTargetOrder = (targets: readonly Target[]): Target[] => {
  const rank = (t: Target): number => {
    const i = (TARGET_ORDER as readonly string[]).indexOf(t.id);
    return i < 0 ? TARGET_ORDER.length : i;
  };
  return [...targets].sort((a, b) => rank(a) - rank(b));
};

export const target = (t: Omit<Target, 'met'>): Target => ({
  ...t,
  met: Number.isFinite(t.ratio) && (t.lowerIsBetter ? t.ratio <= t.required : t.ratio >= t.required),
});

const fmt = (v: number | null | undefined, digits = 0): string => {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  return v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
};
const ms = (v: number): string => (v < 0.1 ? fmt(v, 3) : v < 10 ? fmt(v, 2) : fmt(v, 1));

export const figureTable = (figures: readonly Figure[]): string => {
  const head =
    '| figure | clients | ops/s | p50 ms | p99 ms | client CPU µs/op | server CPU µs/op | round trips/op | retries/op | commit floor ops/s | × floor |\n' +
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|';
  const lines = figures.map((f) => {
    const s = f.summary;
    const rt = s.perOp.roundTrips;
    const retries = s.perOp.retries;
    const failed = s.perOp.failures;
    const floor = f.floor?.opsPerSec;
    return `| ${f.label}${f.note ? ` (${f.note})` : ''} | ${f.clients} | ${fmt(s.opsPerSec)} | ${ms(s.p50Ms)} | ${ms(s.p99Ms)} | ${fmt(s.clientCpuMsPerOp * 1000)} | ${fmt(
      s.serverCpuMsPerOp === null ? null : s.serverCpuMsPerOp * 1000,
    )} | ${rt === undefined ? '–' : fmt(rt, 1)} | ${retries === undefined ? '–' : fmt(retries, 3)}${failed ? ` (${fmt(failed * 100, 1)}% failed)` : ''} | ${fmt(floor)} | ${floor ? fmt(s.opsPerSec / floor, 2) : '–'} |`;
  });
  return [head, ...lines].join('\n');
};

/** How far off a missed target is, as a factor of what it requires. */
const missedBy = (t: Target): string => {
  if (!Number.isFinite(t.ratio) || t.ratio <= 0) return '';
  const by = t.lowerIsBetter ? t.ratio / t.required : t.required / t.ratio;
  return by > 1 ? ` by ${fmt(by, 2)}×` : '';
};

export const targetTable = (targets: readonly Target[]): string => {
  const head = '| target | measured | ratio | required | met |\n|---|---|---:|---:|:---:|';
  const lines = targets.map(
    (t) =>
      `| ${t.text} | ${t.detail} | ${fmt(t.ratio, t.digits ?? 2)}${t.unit ?? '×'} | ${t.lowerIsBetter ? '≤' : '≥'} ${fmt(t.required, t.digits ?? (Number.isInteger(t.required * 10) ? 1 : 2))}${t.unit ?? '×'} | ${t.met ? 'met' : `**missed**${missedBy(t)}${t.why ? `: ${t.why}` : ''}`} |`,
  );
  return [head, ...lines].join('\n');
};

const kb = (v: number): string => `${fmt(v / 1024, 1)} KB`;

export const bytesTable = (bytes: readonly BytesFigure[]): string => {
  const head = '| bytes per start | starts | tables + indexes | WAL | canonical records | tables × canonical |\n|---|---:|---:|---:|---:|---:|';
  const lines = bytes.map((b) => `| ${b.label} | ${fmt(b.starts)} | ${kb(b.tableBytes)} | ${kb(b.walBytes)} | ${kb(b.canonicalBytes)} | ${fmt(b.tableBytes / b.canonicalBytes, 2)} |`);
  return [head, ...lines].join('\n');
};
