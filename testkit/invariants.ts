import { START_FACT_TYPES, isStartBarrierError } from '../domain';
import type { StoredBarrier } from '../domain/records';
import type { RawSql } from './rawSql';

// What must hold in any store at any moment, read straight from the tables (the harness does
// not trust the code under test to report on itself), plus a verified read of every start
// through the repository (R5.3). Used after every kill of the crash soak, after the failover,
// and by the SQLite crash spec. Cost per check is linear in the store: anti-joins on unique
// keys and id lists; the full verified read covers only starts not verified before.

export interface StartReader {
  getByStartId(startId: string): Promise<StoredBarrier | null>;
}

export type ProblemKind =
  | 'acknowledged_missing'
  | 'acknowledged_changed'
  | 'unverifiable'
  | 'fact_count'
  | 'start_incomplete'
  | 'evidence_without_move'
  | 'mutation_without_barrier'
  | 'running_without_barrier'
  | 'step_run_behind'
  | 'outcome_missing'
  | 'stream_head'
  | 'sqlite_integrity';

export interface StoreProblem {
  readonly kind: ProblemKind;
  readonly record: string;
  readonly detail: string;
}

export interface StoreCheck {
  /** Barriers stored. */
  readonly stored: number;
  readonly acknowledged: number;
  /** Acknowledged starts present, with the digest the client was given. */
  readonly found: number;
  /** Starts whose rows were read back and verified by this check. */
  readonly verifiedNow: number;
  /** Distinct starts, StepRuns or streams that are not whole (must be 0). */
  readonly partial: number;
  readonly problems: readonly StoreProblem[];
}

export interface StoreCheckOptions {
  /** startId -> the barrier digest the client saw acknowledged (undefined: presence only). */
  readonly acknowledged: ReadonlyMap<string, string | undefined>;
  /** Starts verified by an earlier check (rows are immutable); this check adds the rest. */
  readonly verified?: Set<string>;
  /** Verify every stored start again, even those verified before. */
  readonly full?: boolean;
}

const OUTCOME_TYPES = ['StepRunLost', 'StepRunCompleted', 'StepRunFailed'] as const;
const n = (v: unknown): number => Number(v);
const list = (values: readonly string[]): string => values.map((v) => `'${v}'`).join(', ');

export const checkStore = async (raw: RawSql, reader: StartReader, options: StoreCheckOptions): Promise<StoreCheck> => {
  const t = raw.t.bind(raw);
  const problems: StoreProblem[] = [];
  const add = (kind: ProblemKind, record: string, detail: string) => problems.push({ kind, record, detail });

  // -- every fact table holds exactly one row per barrier, the index seven (SQLite: the facts' keys), the log five events
  const [counts] = await raw.all<Record<string, unknown>>(`SELECT
      (SELECT count(*) FROM ${t('tool_execution_start_barriers')}) AS barriers,
      (SELECT count(*) FROM ${t('security_audit_events')}) AS audits,
      (SELECT count(*) FROM ${t('trace_anchors')}) AS traces,
      (SELECT count(*) FROM ${t('audit_receipts')}) AS receipts,
      (SELECT count(*) FROM ${t('step_run_mutations')}) AS mutations`);
  const stored = n(counts?.barriers);
  // each identity is its fact's own key: the facts' counts are the identities'
  for (const [name, expected] of [['audits', stored], ['traces', stored], ['receipts', stored], ['mutations', stored]] as const) {
    if (n(counts?.[name]) !== expected) add('fact_count', name, `${n(counts?.[name])} rows for ${stored} barriers (expected ${expected})`);
  }
  const byType = await raw.all<{ event_type: string; n: unknown }>(
    `SELECT event_type, count(*) AS n FROM ${t('events')} WHERE event_type IN (${list(START_FACT_TYPES)}) GROUP BY event_type`,
  );
  for (const type of START_FACT_TYPES) {
    const found = n(byType.find((r) => r.event_type === type)?.n ?? 0);
    if (found !== stored) add(type === 'StepRunStarted' ? 'mutation_without_barrier' : type === 'ToolExecutionStartBarrierCommitted' ? 'fact_count' : 'evidence_without_move', type, `${found} ${type} events for ${stored} barriers`);
  }

  // -- no evidence and no StepRun move without the barrier that binds it (same start)
  const orphanFacts = await raw.all<{ tbl: string; start_id: string }>(`
    SELECT 'security_audit_events' AS tbl, a.start_id FROM ${t('security_audit_events')} a
      LEFT JOIN ${t('tool_execution_start_barriers')} b ON b.audit_event_id = a.audit_event_id AND b.start_id = a.start_id WHERE b.start_id IS NULL
    UNION ALL SELECT 'trace_anchors', x.start_id FROM ${t('trace_anchors')} x
      LEFT JOIN ${t('tool_execution_start_barriers')} b ON b.trace_id = x.trace_id AND b.start_id = x.start_id WHERE b.start_id IS NULL
    UNION ALL SELECT 'audit_receipts', r.start_id FROM ${t('audit_receipts')} r
      LEFT JOIN ${t('tool_execution_start_barriers')} b ON b.audit_receipt_id = r.audit_receipt_id AND b.start_id = r.start_id WHERE b.start_id IS NULL
    UNION ALL SELECT 'step_run_mutations', m.start_id FROM ${t('step_run_mutations')} m
      LEFT JOIN ${t('tool_execution_start_barriers')} b ON b.mutation_id = m.mutation_id AND b.start_id = m.start_id WHERE b.start_id IS NULL`);
  for (const o of orphanFacts) add(o.tbl === 'step_run_mutations' ? 'mutation_without_barrier' : 'evidence_without_move', o.start_id, `${o.tbl} row without its barrier`);

  // -- every barrier has its four fact rows and its five events, in order, in its Run stream
  const incomplete = await raw.all<Record<string, unknown>>(`
    SELECT b.start_id, a.audit_event_id AS audit, x.trace_id AS trace, r.audit_receipt_id AS receipt, m.mutation_id AS mutation,
           e1.event_type AS t1, e2.event_type AS t2, e3.event_type AS t3, e4.event_type AS t4, e5.event_type AS t5,
           e1.stream_position AS p1, e2.stream_position AS p2, e3.stream_position AS p3, e4.stream_position AS p4, e5.stream_position AS p5,
           e1.stream_id AS s1, e5.stream_id AS s5, b.run_id
      FROM ${t('tool_execution_start_barriers')} b
      LEFT JOIN ${t('security_audit_events')} a ON a.audit_event_id = b.audit_event_id AND a.start_id = b.start_id
      LEFT JOIN ${t('trace_anchors')} x ON x.trace_id = b.trace_id AND x.start_id = b.start_id
      LEFT JOIN ${t('audit_receipts')} r ON r.audit_receipt_id = b.audit_receipt_id AND r.start_id = b.start_id
      LEFT JOIN ${t('step_run_mutations')} m ON m.mutation_id = b.mutation_id AND m.start_id = b.start_id
      LEFT JOIN ${t('events')} e1 ON e1.event_id = 'audit:' || b.audit_event_id
      LEFT JOIN ${t('events')} e2 ON e2.event_id = 'trace:' || b.trace_id
      LEFT JOIN ${t('events')} e3 ON e3.event_id = 'receipt:' || b.audit_receipt_id
      LEFT JOIN ${t('events')} e4 ON e4.event_id = b.run_event_id
      LEFT JOIN ${t('events')} e5 ON e5.event_id = 'barrier:' || b.start_id
     WHERE a.audit_event_id IS NULL OR x.trace_id IS NULL OR r.audit_receipt_id IS NULL OR m.mutation_id IS NULL
        OR e1.event_id IS NULL OR e2.event_id IS NULL OR e3.event_id IS NULL OR e4.event_id IS NULL OR e5.event_id IS NULL
        OR e1.event_type <> 'SecurityAuditEventRecorded' OR e2.event_type <> 'TraceAnchorRecorded' OR e3.event_type <> 'AuditReceiptIssued'
        OR e4.event_type <> 'StepRunStarted' OR e5.event_type <> 'ToolExecutionStartBarrierCommitted'
        OR e2.stream_position <> e1.stream_position + 1 OR e3.stream_position <> e1.stream_position + 2
        OR e4.stream_position <> e1.stream_position + 3 OR e5.stream_position <> e1.stream_position + 4
        OR e1.stream_id <> 'run-' || b.run_id OR e2.stream_id <> e1.stream_id OR e3.stream_id <> e1.stream_id
        OR e4.stream_id <> e1.stream_id OR e5.stream_id <> e1.stream_id`);
  for (const row of incomplete) add('start_incomplete', String(row.start_id), `start is not whole: ${JSON.stringify(row)}`);

  // -- no StepRun running without the barrier of exactly that attempt
  const running = await raw.all<{ run_id: string; step_run_id: string; version: unknown }>(`
    SELECT s.run_id, s.step_run_id, s.version FROM ${t('step_runs')} s
      LEFT JOIN ${t('tool_execution_start_barriers')} b
        ON b.run_id = s.run_id AND b.step_run_id = s.step_run_id AND b.started_step_run_version = s.version
     WHERE s.status = 'running' AND b.start_id IS NULL`);
  for (const r of running) add('running_without_barrier', `${r.run_id}/${r.step_run_id}`, `StepRun running at version ${n(r.version)} with no barrier for that attempt`);

  // -- every barrier's StepRun is running at that version, or later with the start's outcome
  const moved = await raw.all<{ start_id: string; v: unknown; sv: unknown; status: string | null }>(`
    SELECT b.start_id, b.started_step_run_version AS v, s.version AS sv, s.status FROM ${t('tool_execution_start_barriers')} b
      LEFT JOIN ${t('step_runs')} s ON s.run_id = b.run_id AND s.step_run_id = b.step_run_id
     WHERE s.run_id IS NULL OR s.version <> b.started_step_run_version OR s.status <> 'running'`);
  if (moved.length > 0) {
    const outcomes = new Map<string, number>();
    for (const e of await raw.all<{ data_json: string }>(`SELECT data_json FROM ${t('events')} WHERE event_type IN (${list(OUTCOME_TYPES)})`)) {
      const d = JSON.parse(e.data_json) as { startId?: string; stepRunVersion?: number };
      if (typeof d.startId === 'string') outcomes.set(d.startId, Number(d.stepRunVersion));
    }
    for (const m of moved) {
      if (m.sv === null || n(m.sv) < n(m.v) || (n(m.sv) === n(m.v) && m.status !== 'running')) {
        add('step_run_behind', m.start_id, `barrier for version ${n(m.v)} but the StepRun is ${m.status ?? '(missing)'} at ${m.sv === null ? '-' : n(m.sv)}`);
      } else if (outcomes.get(m.start_id) !== n(m.v) + 1) {
        add('outcome_missing', m.start_id, `StepRun moved on to version ${n(m.sv)} without an outcome for this start at ${n(m.v) + 1}`);
      }
    }
  }

  // -- stream head = Run head = number of events in the stream
  const heads = await raw.all<{ stream_id: string; version: unknown; run_version: unknown; events: unknown; max_position: unknown }>(`
    SELECT * FROM (
      SELECT s.stream_id, s.version, r.version AS run_version,
             (SELECT count(*) FROM ${t('events')} e WHERE e.stream_id = s.stream_id) AS events,
             (SELECT max(stream_position) FROM ${t('events')} e WHERE e.stream_id = s.stream_id) AS max_position
        FROM ${t('streams')} s LEFT JOIN ${t('runs')} r ON r.run_id = substr(s.stream_id, 5)) h
     WHERE run_version IS NULL OR version <> run_version OR events <> version OR max_position <> version`);
  for (const h of heads) add('stream_head', h.stream_id, `stream at ${n(h.version)}, run head at ${String(h.run_version)}, ${n(h.events)} events (last position ${String(h.max_position)})`);

  if (raw.dialect === 'sqlite') {
    const fk = await raw.all('PRAGMA foreign_key_check');
    if (fk.length > 0) add('sqlite_integrity', 'foreign_key_check', JSON.stringify(fk.slice(0, 5)));
    const [integrity] = await raw.all<{ quick_check: string }>('PRAGMA quick_check');
    if (integrity?.quick_check !== 'ok') add('sqlite_integrity', 'quick_check', JSON.stringify(integrity));
  }

  // -- acknowledged starts: present with the digest the client saw; every unverified start verified
  const digests = new Map(
    (await raw.all<{ start_id: string; barrier_digest: string }>(`SELECT start_id, barrier_digest FROM ${t('tool_execution_start_barriers')}`)).map((r) => [r.start_id, r.barrier_digest]),
  );
  let found = 0;
  for (const [startId, digest] of options.acknowledged) {
    const storedDigest = digests.get(startId);
    if (storedDigest === undefined) add('acknowledged_missing', startId, 'acknowledged to a client, not in the store');
    else if (digest !== undefined && storedDigest !== digest) add('acknowledged_changed', startId, `acknowledged with ${digest}, stored ${storedDigest}`);
    else found++;
  }
  const verified = options.verified ?? new Set<string>();
  let verifiedNow = 0;
  for (const startId of digests.keys()) {
    if (!options.full && verified.has(startId)) continue;
    try {
      const b = await reader.getByStartId(startId);
      if (b === null) add('unverifiable', startId, 'barrier row exists but the repository does not find it');
      else if (b.barrierDigest !== digests.get(startId)) add('unverifiable', startId, 'repository returned another digest');
      else {
        verified.add(startId);
        verifiedNow++;
      }
    } catch (e) {
      add('unverifiable', startId, isStartBarrierError(e) ? `${e.code}: ${e.message}` : `untyped: ${String(e)}`);
    }
  }

  const partial = new Set(problems.filter((p) => p.kind !== 'acknowledged_missing').map((p) => `${p.kind}:${p.record}`)).size;
  return { stored, acknowledged: options.acknowledged.size, found, verifiedNow, partial, problems };
};

export const describeProblems = (problems: readonly StoreProblem[], max = 10): string =>
  problems
    .slice(0, max)
    .map((p) => `  ${p.kind} ${p.record}: ${p.detail}`)
    .join('\n') + (problems.length > max ? `\n  … and ${problems.length - max} more` : '');
