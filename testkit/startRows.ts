import type { StoredStartRows } from '../application/checks/verifyRows';
import { startEventPositions } from '../domain/eventRows';
import type { RawSql } from './rawSql';
import { REPLAY_IDENTITIES } from '../domain';
import { identitiesOfBarrierSql } from '../infrastructure/sqlite/identities';

/** PostgreSQL: each identity of the start's barrier, probed in the unique key of the fact that holds it. */
const pgIdentityRows = async (raw: RawSql, startId: string): Promise<StoredStartRows['identities']> =>
  (await raw.all(
    `SELECT i.identity, i.value, i.start_id, ib.command_digest FROM ql3.tool_execution_start_barriers b CROSS JOIN LATERAL (
        SELECT 'startId' AS identity, b.start_id AS value, b.start_id
        UNION ALL SELECT 'attempt', '[' || to_json(b.run_id)::text || ',' || to_json(b.step_run_id)::text || ',' || b.started_step_run_version || ']', b.start_id
        UNION ALL SELECT 'mutationId', f.mutation_id, f.start_id FROM ql3.step_run_mutations f WHERE f.mutation_id = b.mutation_id
        UNION ALL SELECT 'runEventId', f.event_id, f.data_json::json ->> 'startId' FROM ql3.events f WHERE f.event_id = b.run_event_id AND f.event_type = 'StepRunStarted'
        UNION ALL SELECT 'traceId', f.trace_id, f.start_id FROM ql3.trace_anchors f WHERE f.trace_id = b.trace_id
        UNION ALL SELECT 'auditEventId', f.audit_event_id, f.start_id FROM ql3.security_audit_events f WHERE f.audit_event_id = b.audit_event_id
        UNION ALL SELECT 'auditReceiptId', f.audit_receipt_id, f.start_id FROM ql3.audit_receipts f WHERE f.audit_receipt_id = b.audit_receipt_id) i
      LEFT JOIN ql3.tool_execution_start_barriers ib ON ib.start_id = i.start_id
      WHERE b.start_id = ? ORDER BY i.identity`,
    [startId],
  )) as unknown as StoredStartRows['identities'];

/** Every stored row of one start, read raw (as `verifyStartRows` takes them). */
export const readStartRows = async (raw: RawSql, startId: string): Promise<StoredStartRows> => {
  const t = raw.t.bind(raw);
  const one = async (sql: string, key: unknown) => (await raw.all(sql, [key]))[0];
  const barrier = (await one(`SELECT * FROM ${t('tool_execution_start_barriers')} WHERE start_id = ?`, startId)) as StoredStartRows['barrier'] | undefined;
  if (barrier === undefined) throw new Error(`no barrier ${startId}`);
  // The RunEvent the barrier names anchors its five events, which hold every record's JSON.
  const anchor = (await one(`SELECT stream_position FROM ${t('events')} WHERE event_id = ?`, barrier.run_event_id)) as { stream_position: number | string } | undefined;
  const positions = startEventPositions(Number(anchor?.stream_position ?? 0));
  return {
    barrier,
    audit: (await one(`SELECT * FROM ${t('security_audit_events')} WHERE audit_event_id = ?`, barrier.audit_event_id)) as StoredStartRows['audit'],
    trace: (await one(`SELECT * FROM ${t('trace_anchors')} WHERE trace_id = ?`, barrier.trace_id)) as StoredStartRows['trace'],
    receipt: (await one(`SELECT * FROM ${t('audit_receipts')} WHERE audit_receipt_id = ?`, barrier.audit_receipt_id)) as StoredStartRows['receipt'],
    mutation: (await one(`SELECT * FROM ${t('step_run_mutations')} WHERE mutation_id = ?`, barrier.mutation_id)) as StoredStartRows['mutation'],
    events: (await raw.all(
      `SELECT stream_id, stream_position, event_id, event_type, data_json, committed_at_ms FROM ${t('events')}
        WHERE stream_id = ? AND stream_position >= ? AND stream_position <= ? ORDER BY stream_position`,
      [`run-${barrier.run_id}`, positions[0], positions[4]],
    )) as unknown as StoredStartRows['events'],
    // the command digest is the barrier's; each identity is the key of the fact that holds it
    identities: raw.dialect === 'postgres'
      ? await pgIdentityRows(raw, startId)
      : ((await raw.all(
          `SELECT i.identity, i.value, i.start_id, b.command_digest FROM (${identitiesOfBarrierSql()}) i
            LEFT JOIN tool_execution_start_barriers b ON b.start_id = i.start_id ORDER BY i.identity`,
          REPLAY_IDENTITIES.map(() => startId),
        )) as unknown as StoredStartRows['identities']),
  };
};
