import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ServerCpu } from '../lib/cpu';
import type { RoundResult } from '../lib/measure';
import { percentile, sortedCopy } from '../lib/stats';

// pgbench (it ships with PostgreSQL), builtin tpcb-like, against its own fresh database on the
// same server. One thread (-j 1) like our single Node process; latencies from its per-
// transaction log; client CPU from what this process reaped from it.

const candidates = ['/usr/lib/postgresql/15/bin/pgbench', '/usr/bin/pgbench'];
export const pgbenchPath = (): string => {
  const found = candidates.find((p) => existsSync(p));
  if (found === undefined) throw new Error('pgbench not found (it ships with the postgresql package)');
  return found;
};

const exec = (args: readonly string[]): Promise<string> =>
  new Promise((resolve, reject) => {
    const child = spawn(pgbenchPath(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`pgbench ${args.join(' ')} exited ${code}: ${out.slice(-1500)}`))));
  });

/** CPU this process has reaped from its children (pgbench), in ms. */
const reapedChildCpuMs = (): number => {
  const text = readFileSync('/proc/self/stat', 'utf8');
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return (Number(f[13]) + Number(f[14])) * 10;
};

export const pgbenchInit = async (url: string, scale: number): Promise<void> => {
  await exec(['-i', '-q', '-s', String(scale), url]);
};

export const pgbenchRound = async (url: string, clients: number, seconds: number): Promise<RoundResult> => {
  const dir = mkdtempSync(join(process.env.TMPDIR ?? '/tmp', 'pgbench-'));
  try {
    const child0 = reapedChildCpuMs();
    const server = new ServerCpu(200);
    const out = await exec(['-n', '-b', 'tpcb-like', '-c', String(clients), '-j', '1', '-T', String(seconds), '-l', '--log-prefix', join(dir, 'log'), url]);
    const serverMs = server.stop();
    const child1 = reapedChildCpuMs();
    const tps = Number(/tps = ([\d.]+) \(without initial connection time\)/.exec(out)?.[1] ?? NaN);
    const latencies: number[] = [];
    for (const f of readdirSync(dir)) {
      for (const line of readFileSync(join(dir, f), 'utf8').split('\n')) {
        const us = Number(line.split(' ')[2]);
        if (line.length > 0 && Number.isFinite(us)) latencies.push(us / 1000);
      }
    }
    const sorted = sortedCopy(latencies);
    const ops = latencies.length;
    return {
      ops,
      elapsedMs: seconds * 1000,
      opsPerSec: tps,
      p50Ms: percentile(sorted, 50),
      p99Ms: percentile(sorted, 99),
      clientCpuMsPerOp: (child1 - child0) / ops,
      serverCpuMsPerOp: serverMs / ops,
      // tpcb-like: BEGIN, 3 UPDATEs, SELECT, INSERT, END, one round trip each (simple protocol).
      perOp: { roundTrips: 7 },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
};
