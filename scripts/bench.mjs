#!/usr/bin/env node
// `npm run bench`: compiles the product and the bench with tsc into bench-results/build, then
// runs bench/run.js there with the arguments given. The figures are those of the JavaScript the
// package ships, not of tsx's transform of the sources.
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'bench-results', 'build');
const require = createRequire(import.meta.url);
const run = (args) => {
  const r = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
};

// Under `npm test` (SB_PREBUILT=1) scripts/test.mjs has just compiled everything into the same folder.
if (process.env.SB_PREBUILT !== '1') {
  run([join(root, 'scripts', 'embedMigrations.mjs')]);
  rmSync(out, { recursive: true, force: true }); // no stale output of a file since removed
  run([require.resolve('typescript/bin/tsc'), '-p', join(root, 'tsconfig.bench.json')]);
}
run([join(out, 'bench', 'run.js'), ...process.argv.slice(2)]);
