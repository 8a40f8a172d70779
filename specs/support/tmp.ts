import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A fresh folder per call; removed at process exit. */
const made: string[] = [];
export const freshDir = (label = 'sb'): string => {
  const dir = mkdtempSync(join(tmpdir(), `${label}-`));
  made.push(dir);
  return dir;
};
process.on('exit', () => {
  for (const d of made) rmSync(d, { recursive: true, force: true });
});
export const freshDbPath = (label = 'sb'): string => join(freshDir(label), 'barrier.db');
