import { barrierIdentitiesSql } from '../infrastructure/sqlite/identities';
import { canonicalJson, compactionDigestOf, compactionRecordOf, type ReplayIdentity } from '../domain';
import { buildScenario, type Scenario } from '../domain/scenario';
import { insertRow, judge, type Forgery, type ForgeryTarget, type Statement } from './forgery';

// R14.2 forgeries with the runtime's own credentials (SQLite: any process that opens the file
// without the retention path's gate): compacting a Run, or writing a compaction record or a
// compacted identity. Each must be refused by the database (or reported by verify).

type Row = Record<string, unknown>;

/** A Run whose one start completed: what compaction would take. */
const finished = async (target: ForgeryTarget): Promise<{ s: Scenario; startId: string }> => {
  const s = buildScenario();
  for (const c of s.lifecycle) await target.authority.runs.handle(c);
  const command = s.startCommand();
  await target.authority.barriers.prepare(command);
  await target.authority.recovery.resolve(command.startId, 'completed', { decidedBy: 'forger', reason: 'tool_succeeded' });
  return { s, startId: command.startId };
};

/** Every delete compaction makes, as plain SQL (children first). */
const deletesOf = (target: ForgeryTarget, s: Scenario, startId: string): Statement[] => {
  const t = target.raw.t;
  const byStart = ['start_whole_at_commit', 'start_outcomes', 'adapter_driver_claims', 'start_evidence_macs', 'in_doubt_starts', 'invocation_plans', 'resolution_notes', 'tool_execution_start_barriers', 'audit_receipts', 'trace_anchors', 'security_audit_events', 'step_run_mutations'];
  return [
    ...byStart.filter((x) => target.backend === 'sqlite' || x !== 'start_whole_at_commit').map((x) => ({ sql: `DELETE FROM ${t(x)} WHERE start_id = ?`, params: [startId] })),
    { sql: `DELETE FROM ${t('step_runs')} WHERE run_id = ?`, params: [s.runId] },
    { sql: `DELETE FROM ${t('runs')} WHERE run_id = ?`, params: [s.runId] },
    { sql: `DELETE FROM ${t('events')} WHERE stream_id = ?`, params: [`run-${s.runId}`] },
    { sql: `DELETE FROM ${t('streams')} WHERE stream_id = ?`, params: [`run-${s.runId}`] },
  ];
};

/** The record and identity rows the retention path would write, computed from the rows as a reader sees them. */
const forgedRecord = async (target: ForgeryTarget, s: Scenario): Promise<Statement[]> => {
  const t = target.raw.t;
  const events = await target.raw.all<Row>(`SELECT * FROM ${t('events')} WHERE stream_id = ? ORDER BY stream_position`, [`run-${s.runId}`]);
  const barriers = await target.raw.all<Row>(`SELECT * FROM ${t('tool_execution_start_barriers')} WHERE run_id = ?`, [s.runId]);
  // each identity is its fact's own key: the seven values of each barrier
  const identities =
    target.backend === 'postgres'
      ? await target.raw.all<Row>(
          `SELECT k.identity, k.value, b.start_id FROM ${t('tool_execution_start_barriers')} b
            CROSS JOIN LATERAL (VALUES ('startId', b.start_id), ('mutationId', b.mutation_id), ('runEventId', b.run_event_id), ('traceId', b.trace_id),
              ('auditEventId', b.audit_event_id), ('auditReceiptId', b.audit_receipt_id),
              ('attempt', '[' || to_json(b.run_id)::text || ',' || to_json(b.step_run_id)::text || ',' || b.started_step_run_version || ']')) k (identity, value)
            WHERE b.run_id = ?`,
          [s.runId],
        )
      : await target.raw.all<Row>(`SELECT identity, value, start_id FROM (${barrierIdentitiesSql()}) WHERE start_id IN (SELECT start_id FROM tool_execution_start_barriers WHERE run_id = ?)`, [s.runId]);
  const record = compactionRecordOf({
    runId: s.runId,
    projectId: s.projectId,
    streamVersion: events.length,
    events: events as never,
    barriers: barriers as never,
    identities: identities as { identity: ReplayIdentity; value: string; start_id: string }[],
    beforeMs: Date.now() + 1,
    compactedAtMs: Date.now(),
  });
  const b = barriers[0]!;
  return [
    insertRow(target.raw, 'run_compactions', { run_id: s.runId, record_json: canonicalJson(record), compaction_digest: compactionDigestOf(record) }),
    ...identities.map((i) => insertRow(target.raw, 'compacted_identities', { identity: i.identity, value: i.value, start_id: i.start_id, run_id: s.runId, command_digest: b.command_digest, barrier_digest: b.barrier_digest })),
  ];
};

export const COMPACTION_FORGERIES: readonly Forgery[] = [
  {
    name: 'a finished Run deleted by the runtime, with no compaction record',
    attempt: async (target) => {
      const { s, startId } = await finished(target);
      return judge(target, s, deletesOf(target, s, startId));
    },
  },
  {
    name: 'a finished Run compacted by the runtime: a forged record with a correct digest, then its rows deleted',
    attempt: async (target) => {
      const { s, startId } = await finished(target);
      return judge(target, s, [...(await forgedRecord(target, s)), ...deletesOf(target, s, startId)]);
    },
  },
  {
    name: 'a compaction record forged for a live Run (its rows kept)',
    attempt: async (target) => {
      const { s } = await finished(target);
      return judge(target, s, await forgedRecord(target, s));
    },
  },
  {
    name: 'a compacted identity forged to make a fresh identity refuse reuse',
    attempt: async (target) => {
      const s = buildScenario();
      const c = s.startCommand();
      const compacted = { identity: 'traceId', value: c.evidence.traceId, start_id: c.startId, run_id: s.runId, command_digest: `sha256:${'0'.repeat(64)}`, barrier_digest: `sha256:${'0'.repeat(64)}` };
      return judge(target, s, [insertRow(target.raw, 'compacted_identities', compacted)]);
    },
  },
];
