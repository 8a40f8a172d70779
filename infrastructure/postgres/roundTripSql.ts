import { createHash } from 'node:crypto';
import type { PoolClient } from 'pg';
import { loadPg } from './pool';
import type { NamedSql, Params } from './named';
import { CLOCK_AT_WRITE } from '../../application/startWritePlan';

// The write round trip of a start as text: several prepared statements sent as ONE
// simple-protocol query. PostgreSQL runs the statements of one simple query as one implicit
// transaction (protocol docs, "Multiple Statements in a Simple Query"): an error skips the rest
// and rolls all of it back, and the session is idle again, with nothing to roll back. `SET
// TRANSACTION ISOLATION LEVEL SERIALIZABLE` is valid as its first statement and `SET LOCAL`
// lasts to its end (neither takes a snapshot); on PostgreSQL 13 and later statement_timeout is
// applied to each statement of the string separately, so a SET LOCAL bounds the ones after it.
//
// The statements are the sql.ts fragments, unchanged: each is PREPAREd once per connection (a
// prepared statement outlives a rolled-back transaction) and EXECUTEd with its values as
// literals the driver escapes, each value the text the extended protocol would have bound, so
// the server plans them as it plans the bound statements. A parameter named committed_at_ms
// (or *_committed_at_ms) is the transaction clock of R3.10, computed by the server.

/** What a write plan carries for committed_at_ms until the server stamps it (R3.10). */
export const PENDING_CLOCK = CLOCK_AT_WRITE;
const CLOCK_SQL = '(extract(epoch FROM transaction_timestamp()) * 1000)::bigint';
const isClock = (name: string): boolean => name === 'committed_at_ms' || name.endsWith('_committed_at_ms');

/** One statement of a round trip: a sql.ts fragment and its parameters. */
export interface Part {
  readonly sql: NamedSql;
  readonly params: Params;
}

/** The statements each connection has PREPAREd (a pooled client is the same object across checkouts). */
const preparedOn = new WeakMap<PoolClient, Set<string>>();
const names = new Map<string, string>();
const nameOf = (sql: NamedSql): string => {
  let name = names.get(sql.text);
  if (name === undefined) {
    // ql3w_: never the name pg's own protocol-level statements use (query.ts, ql3_)
    name = `ql3w_${createHash('sha256').update(sql.text).digest('hex').slice(0, 24)}`;
    names.set(sql.text, name);
  }
  return name;
};

/**
 * pg's `escapeLiteral`, byte for byte (quotes doubled; with a backslash, doubled too and the
 * literal prefixed ` E`), in two native replaces: pg's builds the literal one character at a
 * time, and a start's literals carry every event's JSON (tens of microseconds and a heap of
 * short strings per start).
 */
export const escapeLiteral = (text: string): string => {
  const quoted = text.includes("'") ? text.replace(/'/g, "''") : text;
  return text.includes('\\') ? ` E'${quoted.replace(/\\/g, '\\\\')}'` : `'${quoted}'`;
};

/**
 * A value's text as a string constant. Text with nothing to escape is quoted as pg quotes it.
 * Text that has (the events' JSON, whose every quote and backslash would be doubled, twice
 * inside an array) is dollar-quoted, verbatim, when the tag cannot end it early: the text holds
 * no tag, and no tag starts inside it and ends in the closing one. Otherwise it is escaped as
 * pg escapes it. Each is the same constant.
 */
const DOLLAR_TAG = '$ql3$';
export const literalText = (text: string): string => {
  if (!text.includes("'") && !text.includes('\\')) return `'${text}'`;
  // The tag's only border is `$`, so the one way for it to start inside the text and end in
  // the closing tag is a text ending in `$ql3`.
  return !text.includes(DOLLAR_TAG) && !text.endsWith('$ql3') ? `${DOLLAR_TAG}${text}${DOLLAR_TAG}` : escapeLiteral(text);
};

let prepareValue: ((v: unknown) => unknown) | undefined;
const literalOf = (name: string, value: unknown): string => {
  if (isClock(name)) {
    if (value !== PENDING_CLOCK) throw new Error(`parameter :${name} must be the pending transaction clock (R3.10), got ${String(value)}`);
    return CLOCK_SQL;
  }
  if (value === undefined) throw new Error(`SQL parameter :${name} is missing`);
  prepareValue ??= (loadPg() as unknown as { utils: { prepareValue(v: unknown): unknown } }).utils.prepareValue;
  const text = prepareValue(value);
  if (text === null || text === undefined) return 'NULL';
  if (typeof text !== 'string') throw new Error(`SQL parameter :${name} is not text-encodable`);
  return literalText(text);
};

const executeOf = (part: Part): string => {
  const args = part.sql.names.map((n) => literalOf(n, part.params[n]));
  return `EXECUTE ${nameOf(part.sql)}${args.length === 0 ? '' : `(${args.join(', ')})`}`;
};

/** The configured timeouts as SET LOCAL statements (validated integers, inlined), one per entry. */
export const setLocalTimeouts = (t: { readonly statementMs: number; readonly lockMs: number; readonly idleInTransactionMs: number }): string[] => {
  const ms = (v: number) => {
    if (!Number.isSafeInteger(v) || v < 1) throw new RangeError(`timeout ${v} is not a positive integer`);
    return `'${v}'`;
  };
  return [
    `SET LOCAL statement_timeout = ${ms(t.statementMs)}`,
    `SET LOCAL lock_timeout = ${ms(t.lockMs)}`,
    `SET LOCAL idle_in_transaction_session_timeout = ${ms(t.idleInTransactionMs)}`,
  ];
};

/** One query string: `head` (one statement per entry), the PREPAREs this connection still needs, an EXECUTE per part; and where each part's result is. */
export const roundTripText = (client: PoolClient, head: readonly string[], parts: readonly Part[]): { text: string; resultAt: number[] } => {
  let prepared = preparedOn.get(client);
  if (prepared === undefined) preparedOn.set(client, (prepared = new Set()));
  const statements = [...head];
  for (const part of parts) {
    const name = nameOf(part.sql);
    if (prepared.has(name)) continue;
    statements.push(`PREPARE ${name} AS ${part.sql.text}`);
    // Marked now: a PREPARE that ran stays prepared even if a later statement of the string
    // fails; if one did not run, the next EXECUTE says so (26000) and resyncPrepared corrects it.
    prepared.add(name);
  }
  const resultAt = parts.map((_, i) => statements.length + i);
  statements.push(...parts.map((p) => executeOf(p)));
  return { text: statements.join(';\n'), resultAt };
};

/** SQLSTATEs that say this module's record of a connection's prepared statements is wrong. */
export const PREPARED_OUT_OF_STEP = new Set(['26000', '42P05']);

/**
 * The connection's session lost or kept statements this module did not expect (a DISCARD or
 * DEALLOCATE by the pool's owner, a PREPARE that never ran): read what it really holds.
 */
export const resyncPrepared = async (client: PoolClient): Promise<void> => {
  const { rows } = await client.query<{ name: string }>(`SELECT name FROM pg_prepared_statements WHERE name LIKE 'ql3w\\_%'`);
  preparedOn.set(client, new Set(rows.map((r) => r.name)));
};
