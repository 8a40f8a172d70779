import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { buildScenario } from '../../domain/scenario';
import { seededRunOf } from '../lib/startRows';
import { encodeSeededRun } from './seedRows';

// Generates started Runs (valid rows, derived by the domain) for the bulk seeder, off the
// thread that inserts them, and ships each batch as one flat string (see seedRows.ts).

export interface SeedWorkerData {
  readonly prefix: string;
  readonly committedAtMs: number;
  /** Lowest priority (nice 19, this thread only): the generator only takes CPU nobody else wants. */
  readonly background: boolean;
}

/** Runs `from` (inclusive) to `to` (exclusive). */
export interface SeedRequest {
  readonly from: number;
  readonly to: number;
}

export interface SeedBatch extends SeedRequest {
  readonly rows: string;
}

const { prefix, committedAtMs, background } = workerData as SeedWorkerData;
// On Linux a nice value belongs to the thread: pid 0 is this worker's thread, not the process
// (elsewhere it would be the whole process, so the background generator stays at normal priority).
if (background && process.platform === 'linux') setPriority(0, 19);

parentPort!.on('message', (req: SeedRequest) => {
  let rows = '';
  for (let i = req.from; i < req.to; i++) {
    rows += encodeSeededRun(seededRunOf(buildScenario({ prefix: `${prefix}${i.toString(36).padStart(5, '0')}` }), committedAtMs));
  }
  const batch: SeedBatch = { from: req.from, to: req.to, rows };
  parentPort!.postMessage(batch);
});
