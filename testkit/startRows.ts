import type { StoredStartRows } from '../application/checks/verifyRows';
import { startEventPositions } from '../domain/eventRows';
import type { RawSql } from './rawSql';
import { REPLAY_IDENTITIES } from '../domain';
import { identitiesOfBarrierSql } from '../infrastructure/sqlite/identities';

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
    // the command digest is the barrier's (pg-0051); on SQLite the identities are the facts' own keys
    identities: (raw.dialect === 'sqlite'
      ? await raw.all(
          `SELECT i.identity, i.value, i.start_id, b.command_digest FROM (${identitiesOfBarrierSql()}) i
            LEFT JOIN tool_execution_start_barriers b ON b.start_id = i.start_id ORDER BY i.identity`,
          REPLAY_IDENTITIES.map(() => startId),
        )
      : await raw.all(
          `SELECT i.identity, i.value, i.start_id, b.command_digest FROM ${t('start_replay_identities')} i
            LEFT JOIN ${t('tool_execution_start_barriers')} b ON b.start_id = i.start_id WHERE i.start_id = ? ORDER BY i.identity`,
          [startId],
        )) as unknown as StoredStartRows['identities'],
  };
};
