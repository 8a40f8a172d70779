// Progress of `recovery.verify`, for an operator watching a long check: which phase it is in,
// and a done/total that advances at an even pace. Records differ in cost (a barrier is
// re-verified against all its facts with several reads; an event only decodes; the integrity
// checks are whole-table queries at the end), so each phase's records carry a weight: counting
// records alone made the bar crawl through the barriers and then jump.

export const VERIFY_PHASES = ['barriers', 'outcomes', 'runs', 'step_runs', 'events', 'integrity'] as const;
export type VerifyPhase = (typeof VERIFY_PHASES)[number];

export type VerifyProgressListener = (done: number, total: number, phase: VerifyPhase) => void;

export interface VerifyCounts {
  readonly barriers: number;
  readonly outcomes: number;
  readonly runs: number;
  readonly stepRuns: number;
  readonly events: number;
}

/**
 * Cost of one record relative to one event, measured on both backends: a barrier costs tens of
 * events (more on PostgreSQL, where each of its reads is a round trip), runs and StepRuns a few,
 * outcomes less than one. One set of weights between the two backends keeps both close to an
 * even pace, where plain record counts were far off on both.
 */
export const VERIFY_WEIGHTS: Readonly<Record<Exclude<VerifyPhase, 'integrity'>, number>> = {
  barriers: 40,
  outcomes: 1,
  runs: 2,
  step_runs: 2,
  events: 1,
};
/** The integrity queries scan every table once: about this share of one pass over all records. */
export const INTEGRITY_SHARE = 0.05;

export interface VerifyProgress {
  /** `n` more records of `phase` are checked. */
  tick(phase: Exclude<VerifyPhase, 'integrity'>, n: number): void;
  /** The integrity checks start (reported before their one long query) or have finished. */
  integrity(finished: boolean): void;
}

export const createVerifyProgress = (counts: VerifyCounts, listener: VerifyProgressListener | undefined): VerifyProgress => {
  const records =
    counts.barriers * VERIFY_WEIGHTS.barriers +
    counts.outcomes * VERIFY_WEIGHTS.outcomes +
    counts.runs * VERIFY_WEIGHTS.runs +
    counts.stepRuns * VERIFY_WEIGHTS.step_runs +
    counts.events * VERIFY_WEIGHTS.events;
  const integrity = Math.max(1, Math.ceil(records * INTEGRITY_SHARE));
  const total = records + integrity;
  let done = 0;
  const report = (phase: VerifyPhase) => listener?.(Math.min(done, total), total, phase);
  report('barriers');
  return {
    tick: (phase, n) => {
      done += n * VERIFY_WEIGHTS[phase];
      report(phase);
    },
    integrity: (finished) => {
      if (finished) done = total;
      else done = Math.min(done, records);
      report('integrity');
    },
  };
};
