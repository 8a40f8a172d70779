import { Presets, SingleBar } from 'cli-progress';
import type { VerifyPhase, VerifyProgressListener } from '../../application/verifyProgress';

// The `verify` progress bar on a terminal (stderr, so stdout stays the JSON report): the
// phase being checked and an ETA; the weighted progress of recovery.verify keeps it even.

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
