import type { RecoverableStartBarrierAuthority } from '../application/authority';
import type { Tables } from '../infrastructure/memory/memoryAuthority';
import type { DamageSession, RowKey } from './damage';
import type { RawSql } from './rawSql';

// The damage session of the in-memory backend: the same table and column names as the SQL
// stores, over the authority's current tables, so the one damage suite runs on it too. Its
// unique keys are the Maps' keys: a change that would collide is refused, as a unique index
// refuses it, and an identity row cannot be duplicated (there is no index to drop).

type Row = Record<string, unknown>;
type MapName = 'barriers' | 'audit' | 'trace' | 'receipts' | 'mutations' | 'identities' | 'stepRuns' | 'runs' | 'outcomes';

const MAPS: Readonly<Record<string, readonly [MapName, (r: Row) => string]>> = {
  tool_execution_start_barriers: ['barriers', (r) => String(r.start_id)],
  security_audit_events: ['audit', (r) => String(r.audit_event_id)],
  trace_anchors: ['trace', (r) => String(r.trace_id)],
  audit_receipts: ['receipts', (r) => String(r.audit_receipt_id)],
  step_run_mutations: ['mutations', (r) => String(r.mutation_id)],
  start_replay_identities: ['identities', (r) => `${String(r.identity)}\u0000${String(r.value)}`],
  step_runs: ['stepRuns', (r) => `${String(r.run_id)}\u0000${String(r.step_run_id)}`],
  runs: ['runs', (r) => String(r.run_id)],
  start_outcomes: ['outcomes', (r) => String(r.start_id)],
};

/** `a = ? AND b = ?`, the only WHERE form the damage suite writes. */
const matcher = (where: string, params: readonly unknown[]) => {
  const columns = where.split(/\s+AND\s+/i).map((c) => {
    const m = /^(\w+)\s*=\s*\?$/.exec(c.trim());
    if (m === null) throw new Error(`memory damage session: unsupported WHERE ${where}`);
    return m[1]!;
  });
  return (r: Row) => columns.every((c, i) => r[c] === params[i]);
};

const noSql = (): never => {
  throw new Error('the in-memory store has no SQL');
};

export const memoryDamageSession = (authority: RecoverableStartBarrierAuthority): DamageSession => {
  const tables = (): Tables => (authority as unknown as { tables: Tables }).tables;
  const mapOf = (table: string) => {
    const entry = MAPS[table];
    if (entry === undefined) throw new Error(`memory damage session: no table ${table}`);
    return { map: tables()[entry[0]] as unknown as Map<string, Row>, keyOf: entry[1] };
  };
  const eventClash = (r: Row, except: number) =>
    tables().events.some((e, i) => i !== except && ((e.stream_id === r.stream_id && e.stream_position === r.stream_position) || e.event_id === r.event_id));

  return {
    raw: { dialect: 'sqlite', t: (x: string) => x, all: noSql, run: noSql, exec: noSql, tables: noSql, close: async () => undefined } as unknown as RawSql,
    schema: noSql,
    rows: async (table, where, params) => {
      const match = matcher(where, params);
      if (table === 'events') return tables().events.flatMap((e, i) => (match(e as unknown as Row) ? [{ _key: `${i}`, ...e }] : []));
      return [...mapOf(table).map.entries()].filter(([, r]) => match(r)).map(([k, r]) => ({ _key: k, ...r }));
    },
    set: async (table, key, column, value) => {
      if (table === 'events') {
        const i = Number(key);
        const next = { ...(tables().events[i] as unknown as Row), [column]: value };
        if (eventClash(next, i)) return { applied: false, key, reason: 'unique (stream_id, stream_position) or event_id' };
        tables().events[i] = next as never;
        return { applied: true, key };
      }
      const { map, keyOf } = mapOf(table);
      const row = map.get(key);
      if (row === undefined) return { applied: false, key, reason: 'no such row' };
      const next = { ...row, [column]: value };
      const nextKey = keyOf(next);
      if (nextKey !== key && map.has(nextKey)) return { applied: false, key, reason: `unique key ${nextKey}` };
      map.delete(key);
      map.set(nextKey, next);
      return { applied: true, key: nextKey };
    },
    remove: async (table, key: RowKey) => {
      if (table === 'events') {
        const i = Number(key);
        const [row] = tables().events.splice(i, 1);
        return { undo: async () => void tables().events.splice(i, 0, row!) };
      }
      const { map } = mapOf(table);
      const row = map.get(key);
      if (row === undefined) throw new Error(`${table}: no row ${key}`);
      map.delete(key);
      return { undo: async () => void map.set(key, row) };
    },
    insert: async (table, row) => {
      const { map, keyOf } = mapOf(table);
      const key = keyOf(row);
      if (map.has(key)) throw new Error(`${table}: a row ${key} exists`);
      map.set(key, row);
      return { undo: async () => void map.delete(key) };
    },
    close: async () => undefined,
  };
};
