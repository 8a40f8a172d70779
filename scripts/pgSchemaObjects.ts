// Writes infrastructure/postgres/schemaObjects.made.ts: what a fresh migration of schema ql3
// makes, as the catalog read of schemaObjects.ts describes it. Run after adding a PostgreSQL
// migration: `npx tsx scripts/pgSchemaObjects.ts [postgres://superuser@host/db]` (a database
// `ql3_schema_objects_<pid>` is made on that server and dropped again).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from 'pg';
import { migratePostgres } from '../infrastructure/postgres/migrate';
import { loadMigrations } from '../infrastructure/migrations';
import { readSchemaObjects } from '../infrastructure/postgres/schemaObjects';

const main = async (): Promise<void> => {
  const admin = new Client({ connectionString: process.argv[2] ?? 'postgres://postgres@127.0.0.1:5432/postgres' });
  await admin.connect();
  const name = `ql3_schema_objects_${process.pid}`;
  await admin.query(`CREATE DATABASE ${name}`);
  try {
    const client = new Client({ host: admin.host, port: admin.port, user: admin.user, password: admin.password ?? undefined, database: name });
    await client.connect();
    try {
      await migratePostgres(client, loadMigrations('postgres'), { checkObjects: false });
      const found = await readSchemaObjects(client);
      const linesOf = (m: ReadonlyMap<string, string>, indent: string) =>
        [...m].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => `${indent}${JSON.stringify(k)}: ${JSON.stringify(v)},`).join('\n');
      const file = join(__dirname, '..', 'infrastructure', 'postgres', 'schemaObjects.made.ts');
      writeFileSync(
        file,
        `// Written by scripts/pgSchemaObjects.ts from a fresh migration (${loadMigrations('postgres').at(-1)?.name}); do not edit.\n` +
          `export const MADE_BY_MIGRATIONS: Readonly<Record<string, string>> = {\n${linesOf(found.objects, '  ')}\n};\n\n` +
          `/** The deparsed definitions, as PostgreSQL ${found.major} words them: compared on that major version only. */\n` +
          `export const DEFINITIONS_MADE: { readonly major: number; readonly byObject: Readonly<Record<string, string>> } = {\n  major: ${found.major},\n  byObject: {\n${linesOf(found.definitions, '    ')}\n  },\n};\n`,
      );
      process.stdout.write(`${file}: ${found.objects.size} objects, ${found.definitions.size} definitions (PostgreSQL ${found.major})\n`);
    } finally {
      await client.end();
    }
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.end();
  }
};

void main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exitCode = 1;
});
