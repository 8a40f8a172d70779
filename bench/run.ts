import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, hostname, loadavg, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { Command } from 'commander';
import { COMPILED } from './lib/compiled';
import { DEFAULT, QUICK, type BenchContext } from './lib/context';
import { bytesTable, figureTable, inTargetOrder, targetTable } from './lib/report';
import { floorTargets } from './lib/floorTargets';
import { wakeCost, wakeCostText, type WakeCost } from './lib/wakeCost';
import { verificationCost } from './sqlite/verifyCost';
import { sqliteSections } from './sqlite/sections';
import { sqliteRss } from './sqlite/rss';
import { sqliteEdge, type EdgeReport } from './sqlite/edge';
import { postgresSections } from './postgres/sections';
import { inDoubtSection } from './inDoubt';
import { contentionSection } from './postgres/contention';
import { driveSection } from './drive';

// `npm run bench`: one run, this machine, every figure side by side with its limits.
// Prints a markdown table and writes the figures as JSON. `--quick` is a CI smoke test with
// tiny sizes: its numbers mean nothing.

const program = new Command()
  .name('bench')
  .option('--quick', 'tiny sizes: a smoke test of the harness, not a measurement')
  .option('--out <file>', 'where to write the JSON figures', 'bench-results/latest.json')
  .option('--only <sections>', 'comma-separated subset: sqlite,scale,rss,edge,postgres,verify,in-doubt,contention,drive')
  .option('--pg <url>', 'PostgreSQL admin URL (a fresh database is created and dropped per figure group)', process.env.SB_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres')
  .option('--no-store-verify', 'skip recovery.verify() of the large seeded store (about 10 minutes at 10^6 barriers on 2 cores)')
  .option('--cache <dir>', 'where large seeded databases are kept between runs', 'bench-results/cache');

const main = async (): Promise<void> => {
  program.parse();
  const opts = program.opts<{ quick?: boolean; out: string; only?: string; pg: string; cache: string; storeVerify: boolean }>();
  const sizes = opts.quick ? QUICK : DEFAULT;
  const only = opts.only ? new Set(opts.only.split(',')) : undefined;
  const wants = (s: string) => only === undefined || only.has(s);
  const tmp = mkdtempSync(join(tmpdir(), 'start-barrier-bench-'));
  const started = Date.now();
  let edge: EdgeReport | undefined;
  let contention: string | undefined;
  const ctx: BenchContext = {
    sizes,
    tmp,
    cacheDir: resolve(opts.cache),
    figures: [],
    targets: [],
    extra: {},
    floors: {},
    bytes: [],
    storeVerify: opts.storeVerify,
    log: (m) => process.stderr.write(`[bench ${((Date.now() - started) / 1000).toFixed(0).padStart(4)}s] ${m}\n`),
  };
  try {
    ctx.extra.wakeCost = await wakeCost(sizes.quick ? 40 : 400);
    if (wants('postgres')) await postgresSections(ctx, opts.pg);
    if (wants('contention')) contention = await contentionSection(ctx, opts.pg);
    if (wants('sqlite')) await sqliteSections(ctx, { stored: wants('scale'), stream: wants('scale') });
    else if (wants('scale')) await sqliteSections(ctx, { throughput: false, stored: true, stream: true });
    if (wants('rss')) await sqliteRss(ctx);
    if (wants('edge')) edge = await sqliteEdge(ctx);
    if (wants('verify')) await verificationCost(ctx);
    if (wants('in-doubt')) await inDoubtSection(ctx, opts.pg, { sqlite: true, postgres: true });
    if (wants('drive')) await driveSection(ctx, opts.pg);
    ctx.targets.push(...floorTargets(ctx));
    ctx.targets.splice(0, ctx.targets.length, ...inTargetOrder(ctx.targets));
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  const elapsedS = (Date.now() - started) / 1000;
  const args = [...(opts.quick ? ['--quick'] : []), ...(opts.only ? ['--only', opts.only] : [])];
  const command = COMPILED ? `npm run bench${args.length > 0 ? ` -- ${args.join(' ')}` : ''}` : ['npx tsx bench/run.ts', ...args].join(' ');
  const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, load ${loadavg().map((l) => l.toFixed(2)).join(' ')}`;
  const markdown = [
    `### Start barrier bench${opts.quick ? ' (--quick: smoke test, not a measurement)' : ''}`,
    '',
    `\`${command}\` on ${hostname()} (${machine}), ${new Date(started).toISOString()}, ${elapsedS.toFixed(0)} s, ${COMPILED ? 'compiled by tsc' : 'the sources under tsx'}. ` +
      `Medians of ${sizes.rounds} rounds; every ratio is between figures of this same run. ` +
      `This machine's ${wakeCostText(ctx.extra.wakeCost as WakeCost)}.`,
    '',
    // a section picked with --only leaves the others' tables empty: those are left out
    ...(ctx.figures.length > 0 ? [figureTable(ctx.figures), ''] : []),
    ...(ctx.bytes.length > 0 ? [bytesTable(ctx.bytes), ''] : []),
    ...(ctx.targets.length > 0 ? [targetTable(ctx.targets), ''] : []),
    ...(edge === undefined ? [] : [edge.table, '']),
    ...(contention === undefined ? [] : [contention, '']),
  ].join('\n');
  process.stdout.write(`${markdown}\n`);
  mkdirSync(resolve(opts.out, '..'), { recursive: true });
  writeFileSync(
    opts.out,
    `${JSON.stringify({ command, quick: sizes.quick, startedAt: new Date(started).toISOString(), elapsedS, machine, sizes, figures: ctx.figures, bytes: ctx.bytes, targets: ctx.targets, edge, extra: ctx.extra, markdown }, null, 2)}\n`,
  );
  ctx.log(`wrote ${opts.out}`);
};

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
