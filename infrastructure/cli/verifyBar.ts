import { ValidationError } from '../../domain';
import type { VerifyPhase, VerifyProgressListener } from '../../application/verifyProgress';

// `verify` progress on stderr (stdout stays the JSON report). On a terminal, a bar with the
// phase being checked and an ETA; anywhere else (a service's log, a pipe), a line per phase and
// at most one every few seconds within a phase, as text or as JSON lines (`--progress json`).
// The weighted progress of recovery.verify keeps both even.

const PHASE_LABEL: Readonly<Record<VerifyPhase, string>> = {
  barriers: 'barriers + facts',
  outcomes: 'outcomes',
  runs: 'runs',
  step_runs: 'step runs',
  events: 'event log',
  integrity: 'integrity',
};

export interface VerifyBar {
  readonly onProgress: VerifyProgressListener;
  stop(): void;
}

export const createVerifyBar = (stream: NodeJS.WriteStream): VerifyBar | undefined => {
  if (!stream.isTTY) return undefined;
  // loaded only for a terminal: scripts and CI never draw a bar
  const { Presets, SingleBar } = require('cli-progress') as typeof import('cli-progress');
  const bar = new SingleBar(
    { stream, format: 'verify {phase} [{bar}] {percentage}% | ETA {eta_formatted}', hideCursor: true, etaBuffer: 50, fps: 5 },
    Presets.shades_classic,
  );
  let started = false;
  return {
    onProgress: (done, total, phase) => {
      const payload = { phase: PHASE_LABEL[phase].padEnd(16) };
      if (!started) {
        bar.start(total, done, payload);
        started = true;
      } else {
        bar.setTotal(total);
        bar.update(done, payload);
      }
    },
    stop: () => {
      if (started) bar.stop();
    },
  };
};

export const PROGRESS_MODES = ['auto', 'bar', 'lines', 'json', 'none'] as const;
export type ProgressMode = (typeof PROGRESS_MODES)[number];

/** A line per phase, then at most one per `everyMs` within it, and the last (100%). */
export const createVerifyLines = (stream: NodeJS.WritableStream, json: boolean, everyMs = 10_000, now: () => number = Date.now): VerifyBar => {
  const started = now();
  let last: { phase: VerifyPhase; at: number } | undefined;
  return {
    onProgress: (done, total, phase) => {
      const t = now();
      const finished = done >= total;
      if (last !== undefined && last.phase === phase && t - last.at < everyMs && !finished) return;
      last = { phase, at: t };
      const percent = total === 0 ? 100 : Math.floor((done / total) * 100);
      const elapsedMs = t - started;
      stream.write(
        json
          ? `${JSON.stringify({ verify: 'progress', phase, done, total, percent, elapsedMs })}\n`
          : `verify: ${PHASE_LABEL[phase]} ${percent}% (${done} of ${total}), ${(elapsedMs / 1000).toFixed(0)} s\n`,
      );
    },
    stop: () => undefined,
  };
};

/** What `verify --progress MODE` draws on `stream`: `auto` is the bar on a terminal and lines elsewhere. */
export const createVerifyProgressOutput = (stream: NodeJS.WriteStream, text: string): VerifyBar | undefined => {
  const mode = PROGRESS_MODES.find((m) => m === text);
  if (mode === undefined) throw new ValidationError('command line', [{ path: '--progress', reason: 'invalid_value', message: `expected one of ${PROGRESS_MODES.join(', ')}, got "${text}"` }]);
  if (mode === 'none') return undefined;
  if (mode === 'json') return createVerifyLines(stream, true);
  if (mode === 'lines' || (mode === 'auto' && !stream.isTTY)) return createVerifyLines(stream, false);
  return createVerifyBar(stream);
};
