#!/usr/bin/env node
// `npm test`: compiles once, then runs the tiers in order and prints each tier's time and counts.
//   node scripts/test.mjs              every tier: unit, int, soak
//   node scripts/test.mjs unit int     only those tiers
// One tsc run typechecks every source (product, specs, bench, reliability) and emits them into
// bench-results/build; dist/ is the product's part of that output, so the CLI specs, the packed
// package and the bench smoke test all run what this one compile made (SB_PREBUILT=1 tells them
// not to compile again). The unit tier needs no build: it runs beside tsc (one core each).
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const startedAt = Date.now();
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

const TIERS = {
  unit: 'specs/**/*.unit.spec.ts',
  int: 'specs/**/*.int.spec.ts',
  soak: 'specs/**/*.soak.spec.ts',
};
// The int and soak tiers share one mocha pool (--parallel, one worker process per spec file at a
// time): their files mostly wait on PostgreSQL, fsyncs, child processes, a Patroni switch or a
// tool's timeout, so a few at once keep the 2 cores busy. SB_TEST_JOBS overrides; 1 runs the
// pool serially. The unit tier is CPU only and runs serially before it.
const POOLED = ['int', 'soak'];
const JOBS = Number(process.env.SB_TEST_JOBS ?? 3);
// The slowest files go first, so no long one starts last and runs alone at the end.
// (The CLI specs start a child process per command: about half of the int tier's time.)
const SLOW_FIRST = [
  'specs/reliability/corruption.soak.spec.ts',
  'specs/reliability/reliability.soak.spec.ts',
  'specs/reliability/adapters.soak.spec.ts',
  'specs/package/consumer.soak.spec.ts',
  'specs/bench/quick.soak.spec.ts',
  'specs/cli/hostileInput.int.spec.ts',
  'specs/cli/sqlite.int.spec.ts',
  'specs/postgres/damage.int.spec.ts',
  'specs/cli/postgres.int.spec.ts',
  'specs/cli/cliPolish.int.spec.ts',
  'specs/postgres/bounds.int.spec.ts',
];

/** The tiers' spec files, the slowest first (mocha hands them to free workers in this order). */
const filesOf = (tiers) => {
  const suffixes = tiers.map((t) => TIERS[t].replace('specs/**/*', ''));
  const found = [];
  const walk = (dir) => {
    for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory()) walk(path);
      else if (suffixes.some((s) => e.name.endsWith(s))) found.push(path);
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

/** Embeds the migrations (a failure exits the run), then starts tsc: resolves with its exit code and the compile's time. */
const compile = () => {
  const t0 = Date.now();
  const embed = spawnSync(process.execPath, [join(root, 'scripts', 'embedMigrations.mjs')], { cwd: root, stdio: 'inherit' });
  if (embed.status !== 0) process.exit(embed.status ?? 1);
  const out = join(root, 'bench-results', 'build');
  const dist = join(root, 'dist');
  rmSync(out, { recursive: true, force: true }); // no stale output of a file since removed
  rmSync(dist, { recursive: true, force: true });
  return new Promise((resolve) => {
    const tsc = spawn(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', join(root, 'tsconfig.test.json')], { cwd: root, stdio: 'inherit' });
    tsc.on('close', (code) => {
      if (code === 0) {
        for (const layer of ['domain', 'application', 'infrastructure', 'projections']) {
          cpSync(join(out, layer), join(dist, layer), { recursive: true });
        }
      }
      resolve({ code: code ?? 1, ms: Date.now() - t0 });
    });
  });
};

// Busy CPU milliseconds of the whole machine (every process: mocha, its children, PostgreSQL),
// from /proc/stat (user, nice, system, irq, softirq; 100 ticks a second); undefined where there is none.
const machineBusyMs = () => {
  try {
    const [user, nice, system, , , irq, softirq] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    return (user + nice + system + irq + softirq) * 10;
  } catch {
    return undefined;
  }
};

// Node reads NODE_EXTRA_CA_CERTS at every start (a machine's whole CA bundle: about 40 ms of CPU
// a process where it names 144 certificates), and the specs start over a thousand node
// processes (the CLI, workers, harnesses) that speak TLS to nothing. They run without it; npm,
// which may reach the registry, gets it back in the consumer soak (SB_NPM_EXTRA_CA_CERTS).
const { NODE_EXTRA_CA_CERTS: extraCa, ...inherited } = process.env;
const specEnv = { ...inherited, ...(extraCa === undefined ? {} : { SB_NPM_EXTRA_CA_CERTS: extraCa }) };

/**
 * Runs one mocha over some tiers (the unit tier alone, serially; int and soak in one pool),
 * echoing its output, and reads each tier's counts (scripts/tierReporter.cjs) and each spec
 * file's own time and CPU (testkit/mochaHooks.ts).
 */
const runMocha = (group, jobs) =>
  new Promise((resolve) => {
    const t0 = Date.now();
    const busy0 = machineBusyMs();
    const scratch = mkdtempSync(join(tmpdir(), 'sb-test-'));
    const countsFile = join(scratch, 'counts.json');
    // kept after the run: every spec file's own time, for whoever tunes the suite
    const timesFile = join(root, 'bench-results', `test-times.${group.join('+')}.jsonl`);
    mkdirSync(dirname(timesFile), { recursive: true }); // a clean clone: the unit tier may start before tsc makes it
    rmSync(timesFile, { force: true });
    // --exit: a spec that fails before it closes a server it opened must fail the run, not hang it.
    const parallel = jobs > 1 ? ['--parallel', '--jobs', String(jobs)] : [];
    const files = parallel.length > 0 ? filesOf(group) : group.map((t) => TIERS[t]);
    const reporter = ['--reporter', join(root, 'scripts', 'tierReporter.cjs')];
    const child = spawn(process.execPath, [require.resolve('mocha/bin/mocha.js'), '--exit', ...reporter, ...parallel, ...files], {
      cwd: root,
      env: { ...specEnv, SB_PREBUILT: '1', SB_TIER_COUNTS: countsFile, SB_TEST_TIMES: timesFile },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    child.on('close', (code) => {
      const read = (file, parse) => (existsSync(file) ? parse(readFileSync(file, 'utf8')) : undefined);
      const counts = read(countsFile, JSON.parse) ?? {};
      const times = read(timesFile, (t) => t.split('\n').filter(Boolean).map((l) => JSON.parse(l))) ?? [];
      rmSync(scratch, { recursive: true, force: true });
      const tiers = group.map((tier) => {
        const c = counts[tier] ?? { passed: 0, failed: 0, pending: 0 };
        const own = times.filter((t) => t.files.some((f) => f.endsWith(TIERS[tier].replace('specs/**/*', ''))));
        return { tier, ...c, filesMs: own.reduce((n, t) => n + t.ms, 0) };
      });
      const busy1 = machineBusyMs();
      const busyMs = busy0 === undefined || busy1 === undefined ? undefined : busy1 - busy0;
      resolve({ group, jobs, code, ms: Date.now() - t0, tiers, times, busyMs });
    });
  });

const compiling = compile();
const runs = [];
const serial = tiers.filter((t) => !POOLED.includes(t));
const pooled = tiers.filter((t) => POOLED.includes(t));
for (const tier of serial) runs.push(await runMocha([tier], 1));
const { code: compileCode, ms: compileMs } = await compiling;
if (compileCode !== 0) {
  console.error(`test: tsc exited ${compileCode}; the int and soak tiers need its build`);
  process.exit(compileCode);
}
if (pooled.length > 0) runs.push(await runMocha(pooled, Number.isInteger(JOBS) && JOBS > 0 ? JOBS : 1));

const row = (name, time, c, note = '') =>
  `  ${name.padEnd(9)} ${time.padStart(9)}${c ? `  ${String(c.passed).padStart(7)}  ${String(c.failed).padStart(6)}  ${String(c.pending).padStart(7)}` : ''}${note}`;
console.log('\n  tier           time   passed  failed  pending');
console.log(row('compile', seconds(compileMs)));
for (const r of runs) {
  const exited = r.code !== 0 && r.tiers.every((t) => t.failed === 0) ? `  (mocha exited ${r.code})` : '';
  if (r.group.length === 1 && r.jobs === 1) {
    console.log(row(r.group[0], seconds(r.ms), r.tiers[0], `  beside the compile${exited}`));
    continue;
  }
  // Side by side in one pool: a tier's time is the sum of its files' own times.
  for (const t of r.tiers) console.log(row(t.tier, `${seconds(t.filesMs)}*`, t));
  console.log(row(r.group.join('+'), seconds(r.ms), undefined, `  one pool, ${r.jobs} spec files at a time (* the tier's files' own times, added up)${exited}`));
  const slowest = [...r.times].sort((a, b) => b.ms - a.ms).slice(0, 6);
  console.log(`  slowest files: ${slowest.map((t) => `${t.files.map((f) => f.replace(/^.*specs\//, '')).join(',')} ${seconds(t.ms)}`).join('; ')}`);
  const cpu = (k) => r.times.reduce((n, t) => n + (t.cpuMs?.[k] ?? 0), 0);
  if (r.busyMs !== undefined) {
    console.log(`  CPU: ${seconds(r.busyMs)} busy on the machine; mocha workers ${seconds(cpu('own'))}, their child processes ${seconds(cpu('children'))}, the rest (PostgreSQL, HA tools) ${seconds(r.busyMs - cpu('own') - cpu('children'))}`);
  }
  console.log(`  every file's time: bench-results/test-times.${r.group.join('+')}.jsonl`);
}
console.log(row('total', seconds(Date.now() - startedAt)));
const all = runs.flatMap((r) => r.tiers);
const total = (k) => all.reduce((n, t) => n + t[k], 0);
const failed = total('failed') + runs.filter((r) => r.code !== 0 && r.tiers.every((t) => t.failed === 0)).length;
console.log(`\ntests: ${total('passed')} passed, ${failed} failed, ${total('pending')} skipped`);
process.exit(failed === 0 ? 0 : 1);
