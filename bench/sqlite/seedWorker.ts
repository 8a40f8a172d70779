import { parentPort } from 'node:worker_threads';
import { buildScenario } from '../../domain/scenario';
import { seededRunOf, type SeededRun } from '../lib/startRows';

// Generates started Runs (valid rows, derived by the domain) for the bulk seeder, off the
// main thread that inserts them.

export interface SeedRequest {
  readonly prefix: string;
  readonly from: number;
  readonly to: number;
  readonly committedAtMs: number;
}

parentPort!.on('message', (req: SeedRequest) => {
  const out: Omit<SeededRun, 'start'>[] & { start: Omit<SeededRun['start'], 'facts'> }[] = [];
  for (let i = req.from; i < req.to; i++) {
    const { start, ...rest } = seededRunOf(buildScenario({ prefix: `${req.prefix}${i.toString(36).padStart(5, "0")}` }), req.committedAtMs);
    const { facts: _facts, ...lean } = start;
    out.push({ ...rest, start: lean });
  }
  parentPort!.postMessage(out);
});
