#!/usr/bin/env node
// Writes infrastructure/migrationsSql.generated.ts from migrations/{sqlite,postgres}/*.sql, so
// the SQL ships inside the built code: a bundled or relocated consumer never has to find a
// migrations/ folder on disk (and never picks up an application's own migrations/ by mistake).
// Run by `npm run build` and `npm run typecheck`; a new .sql file is picked up automatically.
import { readdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const target = join(root, 'infrastructure', 'migrationsSql.generated.ts');

const dialect = (name) =>
  readdirSync(join(root, 'migrations', name))
    .filter((f) => f.endsWith('.sql'))
    .sort()
    .map((f) => ({ name: f.replace(/\.sql$/, ''), sql: readFileSync(join(root, 'migrations', name, f), 'utf8') }));

const entries = (list) => list.map((m) => `    { name: ${JSON.stringify(m.name)}, sql: ${JSON.stringify(m.sql)} },`).join('\n');

const text = `// Generated from migrations/ by scripts/embedMigrations.mjs (npm run build): do not edit.
// The SQL text is byte-for-byte the file's, so checksums match stores migrated before.

export interface EmbeddedMigration {
  readonly name: string;
  readonly sql: string;
}

export const EMBEDDED_MIGRATIONS: { readonly sqlite: readonly EmbeddedMigration[]; readonly postgres: readonly EmbeddedMigration[] } = {
  sqlite: [
${entries(dialect('sqlite'))}
  ],
  postgres: [
${entries(dialect('postgres'))}
  ],
};
`;

// Unchanged text is not rewritten, so tsc's incremental view and file watchers stay quiet.
if (!existsSync(target) || readFileSync(target, 'utf8') !== text) writeFileSync(target, text);
