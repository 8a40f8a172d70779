import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const ROOT = join(__dirname, '..', '..');
export const DIALECTS = ['sqlite', 'postgres'] as const;

/** migrations/<dialect>/*.sql as they are on disk, in order: what the code must embed. */
export const onDisk = (dialect: (typeof DIALECTS)[number]): { name: string; sql: string }[] =>
  readdirSync(join(ROOT, 'migrations', dialect))
    .filter((f) => f.endsWith('.sql'))
    .sort()
    .map((f) => ({ name: f.replace(/\.sql$/, ''), sql: readFileSync(join(ROOT, 'migrations', dialect, f), 'utf8') }));
