import { createInterface } from 'node:readline';
import { isStartBarrierError } from '../../domain';
import { openPostgresStartBarrier } from '../../infrastructure/postgres';

// One racer in its own OS process (races.int.spec.ts spawns eight). Protocol on stdio, one
// JSON line each: the parent sends the command on argv, the worker opens its authority
// (migrate: false, as a runtime replica would), prints {"ready":true}, waits for a line on
// stdin (the starting gun, so all eight are connected and parked), prepares, and prints the
// outcome or the typed error's code. The process then exits: no timers, nothing resident.

const main = async (): Promise<void> => {
  const [url, commandJson] = process.argv.slice(2);
  if (url === undefined || commandJson === undefined) throw new Error('usage: raceWorker <connection-url> <command-json>');
  const authority = await openPostgresStartBarrier({ connectionString: url, migrate: false });
  try {
    await authority.runs.getStepRun('warm-up', 'warm-up'); // connect before the gun
    const lines = createInterface({ input: process.stdin });
    const gun = new Promise<void>((resolve) => lines.once('line', () => resolve()));
    process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
    await gun;
    lines.close();
    try {
      const result = await authority.barriers.prepare(JSON.parse(commandJson));
      process.stdout.write(`${JSON.stringify({ outcome: result.outcome, startId: result.barrier.record.startId, pid: process.pid })}\n`);
    } catch (e) {
      process.stdout.write(`${JSON.stringify({ error: isStartBarrierError(e) ? e.code : String(e), name: (e as Error).name, pid: process.pid })}\n`);
    }
  } finally {
    await authority.close();
  }
};

main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
