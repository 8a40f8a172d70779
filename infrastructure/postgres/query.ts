import { createHash } from 'node:crypto';
import type { PoolClient, QueryResultRow } from 'pg';
import { bind, type NamedSql, type Params } from './named';
import * as SQL from './sql';

/** A connection or the pool: anything that runs one statement. */
export type Queryable = Pick<PoolClient, 'query'>;

/**
 * The statements every start (and every outcome) runs are prepared by name, once per connection: an unnamed
 * statement is parsed and planned again on every call, and for these that was most of the
 * server's work per start. Each result is a fixed set of columns (counts, json), so a later
 * migration can only make PostgreSQL re-plan them, never change their type.
 */
const PREPARED = new Map<NamedSql, string>(
  [SQL.LOOKUP_REPLAY, SQL.LOOKUP_REPLAY_AT_VERSION, SQL.READ_RUN_STATE, SQL.START_BATCHED_STATEMENT, SQL.READ_START, SQL.READ_START_KEYED, SQL.READ_BARRIER, SQL.READ_STEP_RUN_LOG, SQL.READ_STEP_RUN_WITH_LOG].map((sql) => [
    sql,
    `ql3_${createHash('sha256').update(sql.text).digest('hex').slice(0, 24)}`,
  ]),
);

/** Runs one named-parameter statement (prepared by name when it is on the start path). */
export const run = async <R extends QueryResultRow>(q: Queryable, sql: NamedSql, params: Params): Promise<R[]> => {
  const values = bind(sql, params);
  const name = PREPARED.get(sql);
  return (await (name === undefined ? q.query<R>(sql.text, values) : q.query<R>({ name, text: sql.text, values }))).rows;
};
