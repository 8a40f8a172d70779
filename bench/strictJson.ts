import { performance } from 'node:perf_hooks';
import { parseJsonBytes } from '../domain';
import { buildScenario } from '../domain/scenario';

// `npx tsx bench/strictJson.ts`: what the strict parser (R10.1: duplicate keys, BOM, lossy
// numbers refused) costs per start command against `JSON.parse`, on the bytes a caller sends.
// Prints medians of several rounds; compare with a start's own cost in `npm run bench`.

const ROUNDS = 9;
const PER_ROUND = 2_000;

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const measure = (parse: (bytes: Buffer) => unknown, bytes: Buffer): number => {
  const rounds: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const t0 = performance.now();
    for (let i = 0; i < PER_ROUND; i++) parse(bytes);
    rounds.push(((performance.now() - t0) * 1000) / PER_ROUND);
  }
  return median(rounds);
};

const command = buildScenario({ withApproval: true }).startCommand();
for (const [shape, text] of [
  ['compact', JSON.stringify(command)],
  ['pretty', JSON.stringify(command, null, 2)],
] as const) {
  const bytes = Buffer.from(text);
  const native = measure((b) => JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(b)), bytes);
  const strict = measure((b) => parseJsonBytes('start command', b), bytes);
  process.stdout.write(
    `${shape.padEnd(8)} ${String(bytes.length).padStart(5)} bytes: JSON.parse ${native.toFixed(1)} us, strict ${strict.toFixed(1)} us, +${(strict - native).toFixed(1)} us per start command (x${(strict / native).toFixed(1)})\n`,
  );
}
