import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { buildScenario } from '../../domain/scenario';
import { openSqliteStartBarrier, type SqliteStartBarrier } from '../../infrastructure/sqlite';
import { lifecycleOf, startWriteOf, trustedDecoded } from '../lib/startRows';
import { ROW_WRITING_TRIGGERS, SqliteWriter } from './bulk';

// The triggers' share of one start's CPU: the bare same-rows transaction on stores with every
// trigger, with the triggers that fire on a start dropped, and with each of them dropped alone;
// the product's start beside it on the store with every trigger (it refuses a store whose
// triggers were dropped, R9.1). In-process (better-sqlite3), so process.cpuUsage covers
// SQLite's work. Interleaved rounds, medians.
// Usage: npx tsx bench/sqlite/triggerShare.ts [rounds] [ops] [--each] [--normal]
// (NORMAL: no fsync per commit, whose system time is noise here; the triggers' work is the same.)

const [rounds, ops] = [Number(process.argv[2] ?? 9), Number(process.argv[3] ?? 200)];
const each = process.argv.includes('--each');
const synchronous = process.argv.includes('--normal') ? 'NORMAL' : 'FULL';
const RUN = randomBytes(4).toString('hex');
let counter = 0;

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'trigshare-'));
  const probe = await openSqliteStartBarrier({ path: join(dir, 'probe.db'), synchronous });
  const all = ((probe.db as Database.Database).prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name").all() as { name: string }[]).map((r) => r.name);
  await probe.close();
  const firing = all.filter((n) => !/_no_(update|delete)$/.test(n) && !ROW_WRITING_TRIGGERS.includes(n));
  const variants: [string, string[]][] = [['all', []], ['none', firing]];
  if (each) for (const t of firing) variants.push([`-${t}`, [t]]);
  const stores: { name: string; a: SqliteStartBarrier; w: SqliteWriter; cpu: number[]; bare: number[] }[] = [];
  for (const [name, drop] of variants) {
    const a = await openSqliteStartBarrier({ path: join(dir, `${stores.length}.db`), synchronous });
    const db = a.db as Database.Database;
    for (const t of drop) db.exec(`DROP TRIGGER ${t}`);
    stores.push({ name, a, w: new SqliteWriter(db), cpu: [], bare: [] });
  }
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? stores : [...stores].reverse();
    for (const s of order) {
      const base = `t${RUN}${(counter++).toString(36)}-`;
      const scenarios = Array.from({ length: ops }, (_, i) => buildScenario({ prefix: `${base}${i}` }));
      s.w.readyRuns(scenarios);
      const commands = scenarios.map((x) => x.startCommand());
      const count = s.w.db.prepare('SELECT count(*) AS n FROM tool_execution_start_barriers');
      const before = (count.get() as { n: number }).n;
      if (s.name === 'all') {
        const c0 = process.cpuUsage();
        for (const c of commands) await s.a.barriers.prepare(c);
        const c1 = process.cpuUsage(c0);
        s.cpu.push((c1.user + c1.system) / ops);
        if ((count.get() as { n: number }).n !== before + ops) throw new Error(`${s.name}: not every start committed`);
      }
      // the bare same-rows transaction on the same store (it pays the same triggers)
      const bareScenarios = Array.from({ length: ops }, (_, i) => buildScenario({ prefix: `${base}b${i}` }));
      s.w.readyRuns(bareScenarios);
      const now = Date.now();
      const writes = bareScenarios.map((x) => startWriteOf(trustedDecoded(x.startCommand()), lifecycleOf(x).state, now));
      const b0 = process.cpuUsage();
      for (const w of writes) s.w.bareStart(w);
      const b1 = process.cpuUsage(b0);
      s.bare.push((b1.user + b1.system) / ops);
    }
  }
  const allBare = median(stores[0]!.bare);
  console.log(`rounds ${rounds} × ${ops} starts, ${synchronous}, median CPU µs per start (ratio to all triggers); bare same-rows transaction alike`);
  for (const s of stores) {
    const b = median(s.bare);
    const start = s.cpu.length === 0 ? `start ${'refused'.padStart(7)}` : `start ${median(s.cpu).toFixed(1).padStart(7)} µs`;
    console.log(`${s.name.padEnd(48)} ${start} | bare ${b.toFixed(1).padStart(7)} µs ${(b / allBare).toFixed(3)} saves ${(allBare - b).toFixed(1).padStart(6)}`);
  }
  for (const s of stores) await s.a.close();
  rmSync(dir, { recursive: true, force: true });
})();
