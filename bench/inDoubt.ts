import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { buildScenario } from '../domain/scenario';
import { openSqliteStartBarrier } from '../infrastructure/sqlite';
import { openPostgresStartBarrier } from '../infrastructure/postgres/postgresAuthority';
import type { BenchContext } from './lib/context';
import { runRound, summarize, type RoundResult } from './lib/measure';
import { target, type Figure } from './lib/report';
import { seededRunOf } from './lib/startRows';
import { createDatabase } from './postgres/admin';
import { seedStartedRuns as seedPostgres } from './postgres/bulk';
import { seedStartedRuns as seedSqlite } from './sqlite/seed';

// `--only in-doubt`: the 100-row page of the in-doubt listing (`recovery.inDoubt({ limit: 100 })`,
// what `in-doubt --limit 100` runs) with 10^5 starts in doubt beside a 10^3 store, on both
// backends. Every seeded Run is started and never resolved, so every one of its starts is in
// doubt: the crash storm's shape. The page reads the in-doubt index (0092), so its
// cost is the rows it lists, not the number in doubt; the two figures should be close. SQLite
// is measured again keyed (R9.4): the seeded barriers get their MACs, and a keyed page checks
// the MAC of each barrier it lists and reads nothing else of the store.

const KEY = { id: 'bench-k1', secret: Buffer.alloc(32, 0x5a) };
const MAC_TAG = 'qinglong/start-barrier-evidence-mac@v1';

/** The MAC each seeded barrier would have had, written by a keyed start (application/evidenceKeys.ts). */
const sealSeeded = (path: string): void => {
  const db = new Database(path);
  try {
    const insert = db.prepare('INSERT INTO start_evidence_macs (start_id, key_id, mac) VALUES (?, ?, ?)');
    const barriers = db.prepare('SELECT start_id, barrier_digest FROM tool_execution_start_barriers').all() as { start_id: string; barrier_digest: string }[];
    db.transaction(() => {
      for (const r of barriers) insert.run(r.start_id, KEY.id, createHmac('sha256', KEY.secret).update(`${MAC_TAG}\n${r.start_id}\n${r.barrier_digest}`, 'utf8').digest('hex'));
    })();
  } finally {
    db.close();
  }
};

const PAGE = 100;

interface Listing {
  inDoubt(query: { limit: number }): Promise<readonly unknown[]>;
}

const pageRounds = async (ctx: BenchContext, a: Listing): Promise<RoundResult[]> => {
  const got = (await a.inDoubt({ limit: PAGE })).length;
  if (got !== PAGE) throw new Error(`the page listed ${got} starts, expected ${PAGE}`);
  const rounds: RoundResult[] = [];
  for (let r = 0; r < ctx.sizes.rounds; r++) rounds.push(await runRound({ clients: 1, opsPerClient: ctx.sizes.quick ? 5 : 30, op: () => a.inDoubt({ limit: PAGE }) }));
  return rounds;
};

const fmtN = (v: number) => (v >= 1e4 ? `10^${Math.log10(v).toFixed(0)}` : v.toLocaleString('en-US'));

const figures = (ctx: BenchContext, backend: 'sqlite' | 'sqlite.keyed' | 'postgres', small: number, large: number, r: { small: RoundResult[]; large: RoundResult[] }) => {
  const s = { small: summarize(r.small), large: summarize(r.large) };
  const name = backend === 'sqlite' ? 'SQLite' : backend === 'sqlite.keyed' ? 'SQLite keyed' : 'PostgreSQL';
  const figs: Figure[] = [
    { id: `${backend}.inDoubt.small`, section: 'in-doubt', label: `${name}: in-doubt page of ${PAGE}, ${fmtN(small)} starts in doubt`, clients: 1, summary: s.small },
    { id: `${backend}.inDoubt.large`, section: 'in-doubt', label: `${name}: in-doubt page of ${PAGE}, ${fmtN(large)} starts in doubt`, clients: 1, summary: s.large },
  ];
  ctx.figures.push(...figs);
  const ratio = s.large.p50Ms / s.small.p50Ms;
  ctx.targets.push(
    target({
      id: `${backend}.inDoubt.page`,
      text: `${name}: a ${PAGE}-row in-doubt page with ${fmtN(large)} in doubt ≥ 0.5× of ${fmtN(small)}`,
      ratio: s.large.opsPerSec / s.small.opsPerSec,
      required: 0.5,
      detail: `p50 ${s.large.p50Ms.toFixed(2)} ms vs ${s.small.p50Ms.toFixed(2)} ms (${ratio.toFixed(2)}× the time)`,
    }),
  );
  ctx.log(`  ${name}: page of ${PAGE}: p50 ${s.small.p50Ms.toFixed(2)} ms at ${fmtN(small)} in doubt, ${s.large.p50Ms.toFixed(2)} ms at ${fmtN(large)} (${ratio.toFixed(2)}×)`);
};

export const inDoubtSection = async (ctx: BenchContext, adminUrl: string, backends: { sqlite: boolean; postgres: boolean }): Promise<void> => {
  const small = ctx.sizes.quick ? 200 : 1_000;
  const large = ctx.sizes.quick ? 600 : 100_000;
  if (backends.sqlite) {
    ctx.log(`in-doubt (SQLite): seeding ${fmtN(small)} and ${fmtN(large)} started Runs`);
    const r: { small: RoundResult[]; large: RoundResult[] } = { small: [], large: [] };
    const keyed: { small: RoundResult[]; large: RoundResult[] } = { small: [], large: [] };
    for (const [key, count] of [['small', small], ['large', large]] as const) {
      const path = join(ctx.tmp, `in-doubt-${count}.db`);
      await seedSqlite(path, count, `doubt${key}-`);
      const a = await openSqliteStartBarrier({ path, synchronous: 'NORMAL' });
      try {
        r[key] = await pageRounds(ctx, a.recovery);
      } finally {
        await a.close();
      }
      sealSeeded(path);
      const k = await openSqliteStartBarrier({ path, synchronous: 'NORMAL', evidenceKeys: { active: KEY } });
      try {
        keyed[key] = await pageRounds(ctx, k.recovery);
      } finally {
        await k.close();
      }
    }
    figures(ctx, 'sqlite', small, large, r);
    figures(ctx, 'sqlite.keyed', small, large, keyed);
  }
  if (backends.postgres) {
    ctx.log(`in-doubt (PostgreSQL): seeding ${fmtN(small)} and ${fmtN(large)} started Runs`);
    const r: { small: RoundResult[]; large: RoundResult[] } = { small: [], large: [] };
    for (const [key, count] of [['small', small], ['large', large]] as const) {
      const db = await createDatabase(adminUrl);
      try {
        const a = await openPostgresStartBarrier({ connectionString: db.url });
        try {
          for (let i = 0; i < count; i += 2000) {
            const n = Math.min(2000, count - i);
            await seedPostgres(a.pool, Array.from({ length: n }, () => seededRunOf(buildScenario(), Date.now())));
          }
          await a.pool.query('BEGIN; SET LOCAL statement_timeout = 0; ANALYZE; COMMIT');
          r[key] = await pageRounds(ctx, a.recovery);
        } finally {
          await a.close();
        }
      } finally {
        await db.drop();
      }
    }
    figures(ctx, 'postgres', small, large, r);
  }
};
