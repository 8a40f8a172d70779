import { existsSync } from 'node:fs';
import { dirname, extname, join } from 'node:path';

// `npm run bench` runs the bench compiled by tsc (scripts/bench.mjs): the product's code as the
// package ships it, not tsx's transform of the sources (which wraps every function expression to
// keep its name, a call each time a closure is made). `npx tsx bench/run.ts` still works: the
// bench's child scripts and worker are then its .ts files, loaded the way this file was.

/** True when this run is the tsc output (.js), false under tsx (.ts). */
export const COMPILED = extname(__filename) === '.js';

/** A bench script in `dir`, in the form this run was started in. */
export const benchScript = (dir: string, name: string): string => join(dir, `${name}${extname(__filename)}`);

/** The checkout's root (its package.json), wherever the compiled tree was written. */
export const PROJECT_ROOT = ((): string => {
  for (let dir = __dirname; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json above ${__dirname}`);
  }
})();
