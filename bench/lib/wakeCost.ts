import { setTimeout as sleep } from 'node:timers/promises';
import { decodeStartCommand } from '../../domain';
import { buildScenario } from '../../domain/scenario';
import { median } from './stats';

// What this machine charges for code that runs right after the process waited. A start runs its
// client code after each wait (a round trip, an fsync); the bare transaction builds its rows
// before it is timed. On a virtual machine whose idle CPU halts, the first instructions after a
// wait run on cold caches, so the same code costs more than back to back, and by how much is a
// property of the machine, not of the product: measured here with one fixed piece of a start's
// own code, the decode of one command.

export interface WakeCost {
  /** One decode, median µs, back to back. */
  readonly hotUs: number;
  /** One decode, median µs, each right after the process slept `idleMs`. */
  readonly afterIdleUs: number;
  readonly idleMs: number;
  readonly ratio: number;
}

const timeOne = (f: () => unknown): number => {
  const t = process.hrtime.bigint();
  f();
  return Number(process.hrtime.bigint() - t) / 1000;
};

export const wakeCost = async (samples = 400, idleMs = 1): Promise<WakeCost> => {
  const command = buildScenario({ prefix: 'wake' }).startCommand();
  const decode = () => decodeStartCommand(command);
  for (let i = 0; i < 2000; i++) decode(); // optimised before either side is timed
  const hot: number[] = [];
  const cold: number[] = [];
  // Alternated in blocks, so a change in the machine's load falls on both sides alike.
  for (let block = 0; block < 8; block++) {
    for (let i = 0; i < samples / 8; i++) hot.push(timeOne(decode));
    for (let i = 0; i < samples / 8; i++) {
      await sleep(idleMs);
      cold.push(timeOne(decode));
    }
  }
  const hotUs = median(hot);
  const afterIdleUs = median(cold);
  return { hotUs, afterIdleUs, idleMs, ratio: afterIdleUs / hotUs };
};

export const wakeCostText = (w: WakeCost): string =>
  `client code right after a wait: decoding one start command takes ${w.hotUs.toFixed(1)} µs back to back and ${w.afterIdleUs.toFixed(1)} µs right after the process slept ${w.idleMs} ms (${w.ratio.toFixed(1)}×)`;
