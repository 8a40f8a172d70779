import type { Summary } from './measure';

// Why a "flat" ratio (a large store or a long Run against a small one) was missed: whether
// each start did more work (CPU per start grew) or waited longer for the same work.

const cpuUs = (s: Summary): number => (s.clientCpuMsPerOp + (s.serverCpuMsPerOp ?? 0)) * 1000;

export const flatWhy = (large: Summary, small: Summary, smallName: string): string => {
  const grew = cpuUs(large) / cpuUs(small);
  const where =
    grew >= 1.1
      ? `each start did more work: ${cpuUs(large).toFixed(0)} µs of client + server CPU against ${cpuUs(small).toFixed(0)} µs on ${smallName} (${grew.toFixed(2)}×)`
      : `the CPU per start stayed ${cpuUs(large).toFixed(0)} µs against ${cpuUs(small).toFixed(0)} µs on ${smallName}, so the time went to waits (I/O, locks, other work on the machine)`;
  return `p50 ${large.p50Ms.toFixed(2)} ms against ${small.p50Ms.toFixed(2)} ms; ${where}`;
};
