// Named parameters for pg. SQL constants are written with `:name` placeholders (never with
// values); `named` compiles one once, at module load, into `$n` text plus the name order, and
// `bind` turns a parameter object into the positional array pg sends. A missing parameter is a
// programming error, never a silent NULL. `::type` casts are left alone.

export interface NamedSql {
  readonly text: string;
  readonly names: readonly string[];
}

const PLACEHOLDER = /(?<!:):([a-z_][a-z0-9_]*)/g;

export const named = (template: string): NamedSql => {
  const names: string[] = [];
  const text = template.replace(PLACEHOLDER, (_match, name: string) => {
    let index = names.indexOf(name);
    if (index < 0) index = names.push(name) - 1;
    return `$${index + 1}`;
  });
  return { text, names };
};

export type Params = Readonly<Record<string, unknown>>;

export const bind = (sql: NamedSql, params: Params): unknown[] =>
  sql.names.map((name) => {
    const value = params[name];
    if (value === undefined) throw new Error(`SQL parameter :${name} is missing`);
    return value;
  });

/** The parameter names `prefixed` made before: the same string objects, so each is a known property key. */
const prefixedNames = new Map<string, Map<string, string>>();
const prefixedName = (prefix: string, key: string): string => {
  let names = prefixedNames.get(prefix);
  if (names === undefined) prefixedNames.set(prefix, (names = new Map()));
  let name = names.get(key);
  if (name === undefined) names.set(key, (name = `${prefix}${key}`));
  return name;
};

/**
 * `{ a: 1 }` with prefix `audit_` -> `{ audit_a: 1 }`: rows bound under one statement's names.
 * Into `into` when given: a start binds a hundred parameters, and merging objects by spread
 * copies each key through the slow path (it was most of a PostgreSQL start's parameter cost).
 */
export const prefixed = (prefix: string, row: object, into: Record<string, unknown> = {}): Record<string, unknown> => {
  for (const key of Object.keys(row)) into[prefixedName(prefix, key)] = (row as Record<string, unknown>)[key];
  return into;
};
