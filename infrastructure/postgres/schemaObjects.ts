import type { ClientBase } from 'pg';
import * as t from 'io-ts';
import { CorruptRecordError } from '../../domain';
import { decodeRows } from './rowCodecs';
import { MADE_BY_MIGRATIONS } from './schemaObjects.made';

// R9.1: the triggers, functions and grants are the database's own refusal of a forged history,
// and the migration ledger cannot show that they are still what the migrations made. One
// catalog read describes every object of schema ql3 in terms that do not change between
// PostgreSQL versions (a function's body by its digest, a trigger by its timing, function and
// enabled state, a privilege by its name; no deparsed expression), and the description must be
// the one a fresh migration gives (schemaObjects.made.ts, written by scripts/pgSchemaObjects.ts).

export const SCHEMA_OBJECTS = `
  WITH ns AS (SELECT oid, nspowner, nspacl FROM pg_catalog.pg_namespace WHERE nspname = 'ql3'),
  rel AS (SELECT c.oid, c.relname, c.relkind, c.relowner, c.relacl, c.relpersistence, c.relrowsecurity FROM pg_catalog.pg_class c JOIN ns ON c.relnamespace = ns.oid WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')),
  fn AS (SELECT p.oid, p.proname::text || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')' AS sig, p.proowner, p.proacl, p.prosecdef, p.provolatile, p.proconfig, p.prosrc, p.prolang FROM pg_catalog.pg_proc p JOIN ns ON p.pronamespace = ns.oid),
  who(oid, name) AS (SELECT oid, rolname::text FROM pg_catalog.pg_roles UNION ALL SELECT 0, 'PUBLIC')
  SELECT kind || ' ' || name AS object, detail FROM (
    SELECT 'schema' AS kind, 'ql3' AS name, 'owner ' || (SELECT name FROM who WHERE oid = ns.nspowner) AS detail FROM ns
    UNION ALL
    SELECT CASE r.relkind WHEN 'S' THEN 'sequence' WHEN 'v' THEN 'view' ELSE 'table' END, r.relname::text,
      concat_ws(' ', 'owner', (SELECT name FROM who WHERE oid = r.relowner), CASE r.relpersistence WHEN 'p' THEN 'logged' WHEN 'u' THEN 'unlogged' ELSE 'temporary' END, CASE WHEN r.relrowsecurity THEN 'row security' END) FROM rel r
    UNION ALL
    SELECT 'column', r.relname::text || '.' || a.attname::text,
      concat_ws(' ', pg_catalog.format_type(a.atttypid, a.atttypmod), CASE WHEN a.attnotnull THEN 'not null' END, CASE WHEN a.atthasdef THEN 'default' END, NULLIF(a.attidentity, ''), NULLIF(a.attgenerated, ''))
    FROM rel r JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid WHERE r.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT 'function', f.sig,
      concat_ws(' ', 'owner', (SELECT name FROM who WHERE oid = f.proowner), (SELECT lanname FROM pg_catalog.pg_language WHERE oid = f.prolang), CASE WHEN f.prosecdef THEN 'security definer' END, 'volatility', f.provolatile, 'config ' || f.proconfig::text, 'body', md5(f.prosrc)) FROM fn f
    UNION ALL
    SELECT 'trigger', r.relname::text || '.' || t.tgname::text,
      concat_ws(' ', 'enabled', t.tgenabled, 'type', t.tgtype, 'calls', (SELECT n.nspname::text || '.' || p.proname::text FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace WHERE p.oid = t.tgfoid),
        'args ' || NULLIF(encode(t.tgargs, 'hex'), ''), 'columns ' || NULLIF(t.tgattr::text, ''), CASE WHEN t.tgqual IS NOT NULL THEN 'when' END, CASE WHEN t.tgdeferrable THEN 'deferrable' END, CASE WHEN t.tginitdeferred THEN 'deferred' END)
    FROM pg_catalog.pg_trigger t JOIN rel r ON r.oid = t.tgrelid WHERE NOT t.tgisinternal
    UNION ALL
    SELECT 'constraint', r.relname::text || '.' || k.conname::text,
      concat_ws(' ', 'type', k.contype, 'columns ' || (SELECT string_agg(a.attname::text, ',' ORDER BY u.i) FROM unnest(k.conkey) WITH ORDINALITY u(n, i) JOIN pg_catalog.pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.n),
        'references ' || (SELECT relname::text FROM pg_catalog.pg_class WHERE oid = NULLIF(k.confrelid, 0)), CASE WHEN NOT k.convalidated THEN 'not valid' END, CASE WHEN k.condeferrable THEN 'deferrable' END, CASE WHEN k.condeferred THEN 'deferred' END)
    FROM pg_catalog.pg_constraint k JOIN rel r ON r.oid = k.conrelid
    UNION ALL
    SELECT 'index', i.relname::text,
      concat_ws(' ', 'on', r.relname, CASE WHEN x.indisunique THEN 'unique' END, 'columns', (SELECT string_agg(COALESCE(a.attname::text, 'expression'), ',' ORDER BY u.i) FROM unnest(x.indkey::int2[]) WITH ORDINALITY u(n, i) LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = u.n),
        CASE WHEN x.indpred IS NOT NULL THEN 'partial' END, CASE WHEN NOT x.indisvalid THEN 'invalid' END)
    FROM pg_catalog.pg_index x JOIN rel r ON r.oid = x.indrelid JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
    UNION ALL
    SELECT 'grant', g.object || ' to ' || (SELECT name FROM who WHERE oid = g.grantee), string_agg(g.privilege_type || CASE WHEN g.is_grantable THEN ' with grant option' ELSE '' END, ', ' ORDER BY g.privilege_type)
    FROM (
      SELECT 'schema ql3'::text AS object, ns.nspowner AS owner, a.* FROM ns, aclexplode(ns.nspacl) a
      UNION ALL SELECT 'table ' || r.relname::text, r.relowner, a.* FROM rel r, aclexplode(r.relacl) a
      UNION ALL SELECT 'column ' || r.relname::text || '.' || c.attname::text, r.relowner, a.* FROM rel r JOIN pg_catalog.pg_attribute c ON c.attrelid = r.oid AND c.attnum > 0 AND c.attacl IS NOT NULL, aclexplode(c.attacl) a
      UNION ALL SELECT 'function ' || f.sig, f.proowner, a.* FROM fn f, aclexplode(COALESCE(f.proacl, acldefault('f', f.proowner))) a
    ) g WHERE g.grantee <> g.owner
    GROUP BY g.object, g.grantee
  ) o ORDER BY kind, name`;

const ObjectRow = t.type({ object: t.string, detail: t.string });

/** Kinds an operator may add without it being damage: a table, view, index or constraint of their own refuses nothing the migrations allow. */
const MAY_ADD = new Set(['table', 'view', 'sequence', 'column', 'index', 'constraint']);

export const readSchemaObjects = async (client: ClientBase): Promise<Map<string, string>> => {
  const rows = decodeRows(ObjectRow, (await client.query(SCHEMA_OBJECTS)).rows, 'schema', 'catalog');
  return new Map(rows.map((r) => [r.object, r.detail]));
};

export const schemaObjectProblems = (found: ReadonlyMap<string, string>): string[] => {
  const problems: string[] = [];
  for (const [object, detail] of Object.entries(MADE_BY_MIGRATIONS)) {
    const f = found.get(object);
    if (f === undefined) problems.push(`${object} is missing`);
    else if (f !== detail) problems.push(`${object} is "${f}", the migrations made "${detail}"`);
  }
  for (const [object, detail] of found) {
    if (!(object in MADE_BY_MIGRATIONS) && !MAY_ADD.has(object.slice(0, object.indexOf(' ')))) problems.push(`${object} (${detail}) is not one the migrations made`);
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
