// A client-CPU loop for the PostgreSQL start path: exact replays, new starts at one client and
// one indexed SELECT on the same pool, each measured with process.cpuUsage (run under
// --cpu-prof to see where it goes). `--roots A,B` loads built checkouts (dist/) instead of the
// sources, round by round interleaved, and reports B/A ratios of client CPU per op.
import { Pool } from 'pg';
import { resolve } from 'node:path';
import { buildScenario, type Scenario } from '../domain/scenario';
import { createDatabase } from './postgres/admin';
import { selectBarrier } from './postgres/bulk';

interface Authority {
  runs: { handle(c: unknown): Promise<unknown> };
  barriers: { prepare(c: unknown): Promise<{ outcome: string }> };
  close(): Promise<void>;
}

const arg = (name: string, dflt: string): string => {
  const i = process.argv.indexOf(name);
  return i < 0 ? dflt : process.argv[i + 1]!;
};

const main = async () => {
  const ops = Number(arg('--ops', '500'));
  const only = arg('--only', 'replay,start,select').split(',');
  const roots = arg('--roots', '').split(',').filter((r) => r !== '');
  const admin = process.env['PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  /* eslint-disable @typescript-eslint/no-require-imports */
  const opens: { label: string; open: (pool: unknown) => Promise<Authority> }[] =
    roots.length === 0
      ? [{ label: 'src', open: (pool) => (require('../infrastructure/postgres') as { openPostgresStartBarrier(o: { pool: unknown }): Promise<Authority> }).openPostgresStartBarrier({ pool }) }]
      : roots.map((r) => ({ label: r, open: (pool) => (require(resolve(r, 'dist/infrastructure/postgres/index.js')) as { openPostgresStartBarrier(o: { pool: unknown }): Promise<Authority> }).openPostgresStartBarrier({ pool }) }));
  const subjects = [];
  for (const o of opens) {
    const db = await createDatabase(admin);
    const pool = new Pool({ connectionString: db.url, max: 2 });
    subjects.push({ ...o, db, pool, a: await o.open(pool) });
  }
  const ready = async (a: Authority): Promise<Scenario> => {
    const s = buildScenario();
    for (const c of s.lifecycle) await a.runs.handle(c);
    return s;
  };
  const rounds = Number(arg('--rounds', '3'));
  const res = new Map<string, number[]>();
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? subjects : [...subjects].reverse();
    for (const w of only) {
      for (const s of order) {
        let cmds: unknown[] = [];
        let op: (i: number) => Promise<unknown>;
        if (w === 'start') {
          const ss: Scenario[] = [];
          for (let i = 0; i < ops; i++) ss.push(await ready(s.a));
          cmds = ss.map((x) => x.startCommand());
          op = (i) => s.a.barriers.prepare(cmds[i]);
        } else {
          const sc = await ready(s.a);
          const cmd = sc.startCommand();
          await s.a.barriers.prepare(cmd);
          op = w === 'replay' ? () => s.a.barriers.prepare(cmd) : () => selectBarrier(s.pool, (cmd as { startId: string }).startId);
        }
        for (let i = 0; i < 20; i++) await (w === 'start' ? Promise.resolve() : op(i));
        const c0 = process.cpuUsage();
        for (let i = 0; i < ops; i++) await op(i);
        const c = process.cpuUsage(c0);
        const us = (c.user + c.system) / ops;
        if (process.env['SPLIT'] !== undefined) console.log(w, s.label, 'user', (c.user / ops).toFixed(0), 'sys', (c.system / ops).toFixed(0));
        const key = `${w}|${s.label}`;
        res.set(key, [...(res.get(key) ?? []), us]);
      }
    }
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  for (const [k, v] of res) console.log(`${k}: client CPU µs/op median ${med(v).toFixed(0)} (${v.map((x) => x.toFixed(0)).join(' ')})`);
  if (subjects.length === 2) {
    for (const w of only) {
      const b = res.get(`${w}|${subjects[0]!.label}`)!;
      const c = res.get(`${w}|${subjects[1]!.label}`)!;
      console.log(`${w}: ${subjects[1]!.label}/${subjects[0]!.label} per-round ${c.map((x, i) => (x / b[i]!).toFixed(2)).join(' ')} median ${med(c.map((x, i) => x / b[i]!)).toFixed(2)}`);
    }
  }
  for (const s of subjects) {
    await s.a.close();
    await s.pool.end();
    await s.db.drop();
  }
};

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
