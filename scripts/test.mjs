#!/usr/bin/env node
// `npm test`: compiles once, then runs the tiers in order and prints each tier's time and counts.
//   node scripts/test.mjs              every tier: unit, int, soak
//   node scripts/test.mjs unit int     only those tiers
// One tsc run typechecks every source (product, specs, bench, reliability) and emits them into
// bench-results/build; dist/ is the product's part of that output, so the CLI specs, the packed
// package and the bench smoke test all run what this one compile made (SB_PREBUILT=1 tells them
// not to compile again).
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

const TIERS = {
  unit: 'specs/**/*.unit.spec.ts',
  int: 'specs/**/*.int.spec.ts',
  soak: 'specs/**/*.soak.spec.ts',
};
// Spec files per tier run at once (mocha --parallel, one worker process per file at a time):
// most of an int spec's time is waiting on PostgreSQL, fsyncs and child processes, not CPU.
// SB_TEST_JOBS overrides; 1 runs the tier serially.
const JOBS = { unit: 1, int: Number(process.env.SB_TEST_JOBS ?? 2), soak: 1 };
// The slowest files go first, so no long one starts last and runs alone at the end.
// (The CLI specs start a child process per command: about half of the int tier's time.)
const SLOW_FIRST = [
  'specs/cli/hostileInput.int.spec.ts',
  'specs/cli/sqlite.int.spec.ts',
  'specs/postgres/damage.int.spec.ts',
  'specs/cli/postgres.int.spec.ts',
  'specs/cli/cliPolish.int.spec.ts',
  'specs/postgres/bounds.int.spec.ts',
];

/** A tier's spec files, the slowest first (mocha hands them to free workers in this order). */
const filesOf = (tier) => {
  const suffix = TIERS[tier].replace('specs/**/*', '');
  const found = [];
  const walk = (dir) => {
    for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory()) walk(path);
      else if (e.name.endsWith(suffix)) found.push(path);
    }
  };
  walk('specs');
  const rank = (f) => (SLOW_FIRST.includes(f) ? SLOW_FIRST.indexOf(f) : SLOW_FIRST.length);
  return found.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
};
const asked = process.argv.slice(2);
for (const t of asked) {
  if (!(t in TIERS)) {
    console.error(`test: unknown tier ${JSON.stringify(t)}; the tiers are ${Object.keys(TIERS).join(', ')}`);
    process.exit(2);
  }
}
const tiers = asked.length > 0 ? asked : Object.keys(TIERS);
const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;

const compile = () => {
  const t0 = Date.now();
  const step = (args) => {
    const r = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
    if (r.status !== 0) process.exit(r.status ?? 1);
  };
  step([join(root, 'scripts', 'embedMigrations.mjs')]);
  const out = join(root, 'bench-results', 'build');
  const dist = join(root, 'dist');
  rmSync(out, { recursive: true, force: true }); // no stale output of a file since removed
  rmSync(dist, { recursive: true, force: true });
  step([require.resolve('typescript/bin/tsc'), '-p', join(root, 'tsconfig.test.json')]);
  for (const layer of ['domain', 'application', 'infrastructure', 'projections']) {
    cpSync(join(out, layer), join(dist, layer), { recursive: true });
  }
  return Date.now() - t0;
};

/** Runs one tier's mocha, echoing its output, and reads its closing counts. */
const runTier = (tier) =>
  new Promise((resolve) => {
    const t0 = Date.now();
    // --exit: a spec that fails before it closes a server it opened must fail the run, not hang it.
    const jobs = Number.isInteger(JOBS[tier]) && JOBS[tier] > 1 ? ['--parallel', '--jobs', String(JOBS[tier])] : [];
    const files = jobs.length > 0 ? filesOf(tier) : [TIERS[tier]];
    const child = spawn(process.execPath, [require.resolve('mocha/bin/mocha.js'), '--exit', ...jobs, ...files], {
      cwd: root,
      env: { ...process.env, SB_PREBUILT: '1' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const chunks = [];
    child.stdout.on('data', (chunk) => {
      process.stdout.write(chunk);
      chunks.push(chunk);
    });
    child.on('close', (code) => {
      // mocha's summary lines ("  N passing (…)"); failure details follow them, so read them all.
      const out = Buffer.concat(chunks).toString('utf8');
      const count = (word) => Number([...out.matchAll(new RegExp(`^  (\\d+) ${word}\\b`, 'gm'))].pop()?.[1] ?? 0);
      resolve({ tier, code, ms: Date.now() - t0, passed: count('passing'), failed: count('failing'), pending: count('pending') });
    });
  });

const compileMs = compile();
const results = [];
for (const tier of tiers) results.push(await runTier(tier));

console.log('\n  tier      time       passed  failed  pending');
console.log(`  compile   ${seconds(compileMs).padStart(8)}`);
for (const r of results) {
  console.log(`  ${r.tier.padEnd(8)}  ${seconds(r.ms).padStart(8)}  ${String(r.passed).padStart(7)}  ${String(r.failed).padStart(6)}  ${String(r.pending).padStart(7)}${r.code !== 0 && r.failed === 0 ? `  (mocha exited ${r.code})` : ''}`);
}
const total = (k) => results.reduce((n, r) => n + r[k], 0);
const failed = total('failed') + results.filter((r) => r.code !== 0 && r.failed === 0).length;
console.log(`\ntests: ${total('passed')} passed, ${failed} failed, ${total('pending')} skipped`);
process.exit(failed === 0 ? 0 : 1);
