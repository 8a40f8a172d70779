import type Database from 'better-sqlite3';
import type { InvocationPlanRow, PlanRowStore } from '../../application/invocationPlans';

// Sealed invocation plans (R12.2) in the authority's SQLite file (invocation_plans), through the
// authority's own connection and its one-operation-at-a-time transactions.

const SQL = {
  insert: 'INSERT INTO invocation_plans (start_id, plan_digest, key_id, nonce, ciphertext, preview_json) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (start_id) DO NOTHING',
  get: 'SELECT start_id, plan_digest, key_id, nonce, ciphertext, preview_json FROM invocation_plans WHERE start_id = ?',
  shred: 'UPDATE invocation_plans SET key_id = NULL, nonce = NULL, ciphertext = NULL WHERE start_id = ? AND ciphertext IS NOT NULL',
  all: 'SELECT start_id, plan_digest, key_id, nonce, ciphertext, preview_json FROM invocation_plans ORDER BY start_id',
};

export interface SqliteRunner {
  /** One `BEGIN IMMEDIATE` on the authority's connection, errors mapped. */
  write<T>(body: () => Promise<T>): Promise<T>;
  read<T>(body: () => T): Promise<T>;
}

/** The side table, and `insertInStart`: the insert run by a start's own transaction (R12.2), no transaction of its own. */
export const sqlitePlanRows = (db: () => Database.Database, run: SqliteRunner): PlanRowStore & { insertInStart(row: InvocationPlanRow): void } => {
  let s: Record<keyof typeof SQL, Database.Statement> | undefined;
  const st = () => (s ??= { insert: db().prepare(SQL.insert), get: db().prepare(SQL.get), shred: db().prepare(SQL.shred), all: db().prepare(SQL.all) });
  const get = (startId: string) => (st().get.get(startId) as InvocationPlanRow | undefined) ?? null;
  const insert = (row: InvocationPlanRow) => void st().insert.run(row.start_id, row.plan_digest, row.key_id, row.nonce, row.ciphertext, row.preview_json);
  return {
    insertInStart: insert,
    insert: (row) =>
      run.write(async () => {
        insert(row);
        return get(row.start_id)!;
      }),
    get: (startId) => run.read(() => get(startId)),
    shred: (startId) => run.write(async () => st().shred.run(startId).changes === 1),
    all: () => run.read(() => st().all.all() as InvocationPlanRow[]),
  };
};
