import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { benchScript } from '../lib/compiled';
import type { BenchContext } from '../lib/context';
import { target } from '../lib/report';
import { slope } from '../lib/stats';

// RSS across `rssStarts` starts, sampled every 1% of the run in a child process.

export interface RssResult {
  readonly startMb: number;
  readonly endMb: number;
  readonly maxMb: number;
  /** Least-squares growth over the last 90% of the run, MB per 10,000 starts. */
  readonly slopeMbPer10k: number;
  readonly elapsedMs: number;
  readonly samples: readonly { starts: number; rssMb: number; heapMb: number }[];
}

export const runChild = (script: string, args: readonly string[]): Promise<string> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...process.execArgv, script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${script} exited ${code}: ${err.slice(-2000)}`))));
  });

export const lastJsonLine = <T>(out: string): T => JSON.parse(out.trim().split('\n').pop() ?? 'null') as T;

export const sqliteRss = async (ctx: BenchContext): Promise<void> => {
  const starts = ctx.sizes.rssStarts;
  ctx.log(`sqlite RSS across ${starts} starts`);
  const every = Math.max(100, Math.round(starts / 100));
  const out = await runChild(benchScript(__dirname, 'rssChild'), [join(ctx.tmp, 'rss.db'), String(starts), String(every)]);
  const { samples, elapsedMs } = lastJsonLine<{ samples: RssResult['samples']; elapsedMs: number }>(out);
  const tail = samples.filter((s) => s.starts >= starts * 0.1);
  const result: RssResult = {
    startMb: samples[0]!.rssMb,
    endMb: samples[samples.length - 1]!.rssMb,
    maxMb: Math.max(...samples.map((s) => s.rssMb)),
    slopeMbPer10k: slope(tail.map((s) => s.starts), tail.map((s) => s.rssMb)) * 10_000,
    elapsedMs,
    samples,
  };
  ctx.extra.rss = result;
  const peak = samples.reduce((a, b) => (b.rssMb > a.rssMb ? b : a));
  const heapSlope = slope(tail.map((s) => s.starts), tail.map((s) => s.heapMb)) * 10_000;
  // Where the memory is: the V8 heap (objects kept alive) or outside it (SQLite's page cache, the allocator).
  const maxWhy = `at the peak (${peak.starts.toLocaleString('en-US')} starts) the V8 heap was ${peak.heapMb.toFixed(0)} MB of ${peak.rssMb.toFixed(0)} MB; the rest is native (SQLite's page cache, the allocator, the code)`;
  const growthWhy = `the V8 heap grew ${heapSlope.toFixed(2)} MB / 10k starts over the same samples, so the growth is ${Math.abs(heapSlope) >= 0.5 * Math.abs(result.slopeMbPer10k) ? 'objects kept alive in the heap' : 'outside the heap (native memory)'}`;
  ctx.targets.push(
    target({
      id: 'rss.max',
      text: `RSS < 200 MB across ${starts.toLocaleString('en-US')} starts (SQLite, one process)`,
      ratio: result.maxMb,
      required: 200,
      unit: ' MB',
      lowerIsBetter: true,
      detail: `start ${result.startMb.toFixed(0)} MB, end ${result.endMb.toFixed(0)} MB, max ${result.maxMb.toFixed(0)} MB`,
      why: maxWhy,
    }),
    target({
      // "Does not grow": under 1 MB per 10,000 starts after warm-up (10 MB over 100,000).
      id: 'rss.growth',
      text: 'RSS flat: no growth after the first 10% of starts (slope)',
      ratio: result.slopeMbPer10k,
      required: 1,
      unit: ' MB/10k',
      lowerIsBetter: true,
      detail: `${result.slopeMbPer10k.toFixed(2)} MB / 10k starts over ${(elapsedMs / 1000).toFixed(0)} s`,
      why: growthWhy,
    }),
  );
};
