import type { Pool } from 'pg';
import type { InvocationPlanRow, PlanRowStore } from '../../application/invocationPlans';
import { mapTimeout } from './errors';
import { bind, named } from './named';

// Sealed invocation plans (R12.2) in schema ql3: one short autocommit statement each,
// on the authority's pool. The runtime role inserts and reads; it shreds only through the
// owner's function (it has no UPDATE of its own).

/** Also sent in a start's own write (roundTripStart.ts, startWrite.ts): the plan commits with its barrier (R12.2). */
export const INSERT_PLAN = named(`INSERT INTO ql3.invocation_plans (start_id, plan_digest, key_id, nonce, ciphertext, preview_json)
  VALUES (:start_id, :plan_digest, :key_id, :nonce, :ciphertext, :preview_json) ON CONFLICT (start_id) DO NOTHING`);
const PLAN_OF = named('SELECT start_id, plan_digest, key_id, nonce, ciphertext, preview_json FROM ql3.invocation_plans WHERE start_id = :start_id');
const ALL_PLANS = named('SELECT start_id, plan_digest, key_id, nonce, ciphertext, preview_json FROM ql3.invocation_plans ORDER BY start_id');
const SHRED_PLAN = named('SELECT ql3.shred_invocation_plan(:start_id) AS shredded');

/** A row's parameters: bytes as a Buffer the driver binds as bytea, or (`asText`, for a literal of roundTripSql.ts) as bytea's hex text. */
export const planParams = (row: InvocationPlanRow, asText = false): Record<string, unknown> => {
  const bytes = (b: Uint8Array | null) => (b === null ? null : asText ? `\\x${Buffer.from(b).toString('hex')}` : Buffer.from(b));
  return { ...row, nonce: bytes(row.nonce), ciphertext: bytes(row.ciphertext) };
};

/** `pool` is read on each call: the authority builds its surface before its pool field is set. */
export const postgresPlanRows = (pool: () => Pool): PlanRowStore => {
  const q = async <R extends object>(sql: ReturnType<typeof named>, params: Record<string, unknown>): Promise<R[]> => {
    try {
      return (await pool().query<R>(sql.text, bind(sql, params))).rows;
    } catch (e) {
      throw mapTimeout(e);
    }
  };
  const get = async (startId: string) => (await q<InvocationPlanRow>(PLAN_OF, { start_id: startId }))[0] ?? null;
  return {
    insert: async (row) => {
      await q(INSERT_PLAN, planParams(row));
      return (await get(row.start_id))!;
    },
    get,
    shred: async (startId) => (await q<{ shredded: number }>(SHRED_PLAN, { start_id: startId }))[0]?.shredded === 1,
    all: () => q<InvocationPlanRow>(ALL_PLANS, {}),
  };
};
