import type { ClientBase } from 'pg';
import * as t from 'io-ts';
import { CorruptRecordError } from '../../domain';
import { decodeRows } from './rowCodecs';
import { MADE_BY_MIGRATIONS, DEFINITIONS_MADE } from './schemaObjects.made';

const MADE = { objects: MADE_BY_MIGRATIONS, definitions: DEFINITIONS_MADE };

// R9.1: the triggers, functions and grants are the database's own refusal of a forged history,
// and the migration ledger cannot show that they are still what the migrations made. One
// catalog read describes every object of schema ql3 in terms that do not change between
// PostgreSQL versions (a function's body by its digest, a trigger by its timing, function and
// enabled state, a privilege by its name), and the description must be the one a fresh
// migration gives (schemaObjects.made.ts, written by scripts/pgSchemaObjects.ts).
//
// The same read deparses what those terms leave out: a CHECK's expression, an index's
// predicate, a trigger's WHEN, a column's default, a function's result. PostgreSQL words these
// differently from one major version to the next, so they are compared only on the major the
// made file was written on; the deparse is read with search_path pinned to pg_catalog, so every
// name in it is qualified whatever the session's path.

export const SCHEMA_OBJECTS = `
  WITH ns AS (SELECT oid, nspowner, nspacl FROM pg_catalog.pg_namespace WHERE nspname = 'ql3'),
  rel AS (SELECT c.oid, c.relname, c.relkind, c.relowner, c.relacl, c.relpersistence, c.relrowsecurity FROM pg_catalog.pg_class c JOIN ns ON c.relnamespace = ns.oid WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')),
  fn AS (SELECT p.oid, p.proname::text || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')' AS sig, p.proowner, p.proacl, p.prosecdef, p.provolatile, p.proconfig, p.prosrc, p.prolang, p.proisstrict FROM pg_catalog.pg_proc p JOIN ns ON p.pronamespace = ns.oid),
  who(oid, name) AS (SELECT oid, rolname::text FROM pg_catalog.pg_roles UNION ALL SELECT 0, 'PUBLIC')
  SELECT kind || ' ' || name AS object, detail, definition FROM (
    SELECT 'schema' AS kind, 'ql3' AS name, 'owner ' || (SELECT name FROM who WHERE oid = ns.nspowner) AS detail, NULL::text AS definition FROM ns
    UNION ALL
    SELECT CASE r.relkind WHEN 'S' THEN 'sequence' WHEN 'v' THEN 'view' ELSE 'table' END, r.relname::text,
      concat_ws(' ', 'owner', (SELECT name FROM who WHERE oid = r.relowner), CASE r.relpersistence WHEN 'p' THEN 'logged' WHEN 'u' THEN 'unlogged' ELSE 'temporary' END, CASE WHEN r.relrowsecurity THEN 'row security' END), NULL FROM rel r
    UNION ALL
    SELECT 'column', r.relname::text || '.' || a.attname::text,
      concat_ws(' ', pg_catalog.format_type(a.atttypid, a.atttypmod), CASE WHEN a.attnotnull THEN 'not null' END, CASE WHEN a.atthasdef THEN 'default' END, NULLIF(a.attidentity, ''), NULLIF(a.attgenerated, '')),
      (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid) FROM pg_catalog.pg_attrdef d WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum)
    FROM rel r JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid WHERE r.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT 'function', f.sig,
      concat_ws(' ', 'owner', (SELECT name FROM who WHERE oid = f.proowner), (SELECT lanname FROM pg_catalog.pg_language WHERE oid = f.prolang), CASE WHEN f.prosecdef THEN 'security definer' END, 'volatility', f.provolatile, 'config ' || f.proconfig::text, 'body', md5(f.prosrc)),
      concat_ws(' ', 'returns', pg_catalog.pg_get_function_result(f.oid), CASE WHEN f.proisstrict THEN 'strict' END) FROM fn f
    UNION ALL
    SELECT 'trigger', r.relname::text || '.' || t.tgname::text,
      concat_ws(' ', 'enabled', t.tgenabled, 'type', t.tgtype, 'calls', (SELECT n.nspname::text || '.' || p.proname::text FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace WHERE p.oid = t.tgfoid),
        'args ' || NULLIF(encode(t.tgargs, 'hex'), ''), 'columns ' || NULLIF(t.tgattr::text, ''), CASE WHEN t.tgqual IS NOT NULL THEN 'when' END, CASE WHEN t.tgdeferrable THEN 'deferrable' END, CASE WHEN t.tginitdeferred THEN 'deferred' END),
      pg_catalog.pg_get_triggerdef(t.oid)
    FROM pg_catalog.pg_trigger t JOIN rel r ON r.oid = t.tgrelid WHERE NOT t.tgisinternal
    UNION ALL
    SELECT 'constraint', r.relname::text || '.' || k.conname::text,
      concat_ws(' ', 'type', k.contype, 'columns ' || (SELECT string_agg(a.attname::text, ',' ORDER BY u.i) FROM unnest(k.conkey) WITH ORDINALITY u(n, i) JOIN pg_catalog.pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.n),
        'references ' || (SELECT relname::text FROM pg_catalog.pg_class WHERE oid = NULLIF(k.confrelid, 0)), CASE WHEN NOT k.convalidated THEN 'not valid' END, CASE WHEN k.condeferrable THEN 'deferrable' END, CASE WHEN k.condeferred THEN 'deferred' END),
      pg_catalog.pg_get_constraintdef(k.oid)
    FROM pg_catalog.pg_constraint k JOIN rel r ON r.oid = k.conrelid
    UNION ALL
    SELECT 'index', i.relname::text,
      concat_ws(' ', 'on', r.relname, CASE WHEN x.indisunique THEN 'unique' END, 'columns', (SELECT string_agg(COALESCE(a.attname::text, 'expression'), ',' ORDER BY u.i) FROM unnest(x.indkey::int2[]) WITH ORDINALITY u(n, i) LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = u.n),
        CASE WHEN x.indpred IS NOT NULL THEN 'partial' END, CASE WHEN NOT x.indisvalid THEN 'invalid' END),
      pg_catalog.pg_get_indexdef(x.indexrelid)
    FROM pg_catalog.pg_index x JOIN rel r ON r.oid = x.indrelid JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
    UNION ALL
    SELECT 'grant', g.object || ' to ' || (SELECT name FROM who WHERE oid = g.grantee), string_agg(g.privilege_type || CASE WHEN g.is_grantable THEN ' with grant option' ELSE '' END, ', ' ORDER BY g.privilege_type), NULL
    FROM (
      SELECT 'schema ql3'::text AS object, ns.nspowner AS owner, a.* FROM ns, aclexplode(ns.nspacl) a
      UNION ALL SELECT 'table ' || r.relname::text, r.relowner, a.* FROM rel r, aclexplode(r.relacl) a
      UNION ALL SELECT 'column ' || r.relname::text || '.' || c.attname::text, r.relowner, a.* FROM rel r JOIN pg_catalog.pg_attribute c ON c.attrelid = r.oid AND c.attnum > 0 AND c.attacl IS NOT NULL, aclexplode(c.attacl) a
      UNION ALL SELECT 'function ' || f.sig, f.proowner, a.* FROM fn f, aclexplode(COALESCE(f.proacl, acldefault('f', f.proowner))) a
    ) g WHERE g.grantee <> g.owner
    GROUP BY g.object, g.grantee
  ) o ORDER BY kind, name`;

const ObjectRow = t.type({ object: t.string, detail: t.string, definition: t.union([t.string, t.null]) });
const MajorRow = t.type({ major: t.number });

/** What the catalog read finds: each object's version-stable description, and its deparsed definition as this server's major version words it. */
export interface SchemaObjects {
  readonly major: number;
  readonly objects: ReadonlyMap<string, string>;
  readonly definitions: ReadonlyMap<string, string>;
}

/** Kinds an operator may add without it being damage: a table, view, index or constraint of their own refuses nothing the migrations allow. */
const MAY_ADD = new Set(['table', 'view', 'sequence', 'column', 'index', 'constraint']);

export const readSchemaObjects = async (client: ClientBase): Promise<SchemaObjects> => {
  const saved = (await client.query<{ path: string }>(`SELECT pg_catalog.current_setting('search_path') AS path`)).rows[0]!.path;
  // One simple query: outside a transaction block it is one implicit transaction, so SET LOCAL
  // ends with it; inside one, the path is set back below.
  const results = (await client.query(
    `SET LOCAL search_path = pg_catalog; SELECT pg_catalog.current_setting('server_version_num')::int / 10000 AS major; ${SCHEMA_OBJECTS}`,
  )) as unknown as { rows: unknown[] }[];
  await client.query(`SELECT pg_catalog.set_config('search_path', $1, true)`, [saved]);
  const [major] = decodeRows(MajorRow, results[1]?.rows ?? [], 'schema', 'server version');
  const rows = decodeRows(ObjectRow, results[2]?.rows ?? [], 'schema', 'catalog');
  if (major === undefined) throw new CorruptRecordError('schema', 'database', 'the server did not say its version');
  return {
    major: major.major,
    objects: new Map(rows.map((r) => [r.object, r.detail])),
    definitions: new Map(rows.flatMap((r): [string, string][] => (r.definition === null ? [] : [[r.object, r.definition]]))),
  };
};

export const schemaObjectProblems = (found: SchemaObjects, made: typeof MADE = MADE): string[] => {
  const problems: string[] = [];
  for (const [object, detail] of Object.entries(made.objects)) {
    const f = found.objects.get(object);
    if (f === undefined) problems.push(`${object} is missing`);
    else if (f !== detail) problems.push(`${object} is "${f}", the migrations made "${detail}"`);
  }
  for (const [object, detail] of found.objects) {
    if (!(object in made.objects) && !MAY_ADD.has(object.slice(0, object.indexOf(' ')))) problems.push(`${object} (${detail}) is not one the migrations made`);
  }
  // A definition where the migrations made none (a column default added) changes the description above too.
  if (found.major === made.definitions.major) {
    for (const [object, definition] of Object.entries(made.definitions.byObject)) {
      const f = found.definitions.get(object);
      if (f !== definition && found.objects.has(object)) problems.push(`${object} is defined as "${f ?? 'nothing'}", the migrations defined "${definition}"`);
    }
  }
  return problems;
};

/** Opening refuses a schema whose objects are not the migrations' (CORRUPT_RECORD, nothing written). */
export const requireSchemaObjects = async (client: ClientBase): Promise<void> => {
  const problems = schemaObjectProblems(await readSchemaObjects(client));
  if (problems.length > 0) {
    throw new CorruptRecordError('schema', 'database', `the schema objects are not the ones the migrations make (${problems.join('; ')}): restore the schema from a backup`);
  }
};
