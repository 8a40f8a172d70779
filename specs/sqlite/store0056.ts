import Database from 'better-sqlite3';
import { loadMigrations } from '../../infrastructure/migrations';
import * as SQL from '../../infrastructure/sqlite/sql';

/** The migrations the released store was made by (the ADR's): everything before the schema file. */
export const RELEASED_MIGRATIONS = loadMigrations('sqlite').filter((m) => m.name < '0057');

/**
 * A store as the released version leaves it (0001-0056 applied, no application id, no chain
 * links, every fact and the barrier with their JSON copies, the replay index with its command
 * digests), holding the rows of `source` (a store this code wrote): each copy is its event's
 * data, as the released writer stored it. What the released version wrote is what this code's
 * log holds, less what it adds: the stored rows are the image of the same starts.
 */
export const store0056From = (source: string, path: string): void => {
  const db = new Database(path);
  try {
    db.exec(SQL.MIGRATIONS_TABLE);
    db.exec('BEGIN');
    for (const m of RELEASED_MIGRATIONS) {
      db.exec(m.sql);
      db.prepare(SQL.INSERT_APPLIED).run(m.name, m.checksum, Date.now());
    }
    db.exec(`ATTACH DATABASE '${source.replace(/'/g, "''")}' AS src`);
    db.exec(`
      INSERT INTO streams SELECT stream_id, stream_type, version FROM src.streams;
      INSERT INTO runs SELECT run_id, project_id, snapshot_id, snapshot_digest, version FROM src.runs;
      INSERT INTO step_runs SELECT run_id, step_run_id, project_id, kind, status, version, digest, state_json FROM src.step_runs;
      INSERT INTO events (global_position, stream_id, stream_position, event_id, event_type, data_json, committed_at_ms)
        SELECT global_position, stream_id, stream_position, event_id, event_type, data_json, committed_at_ms FROM src.events ORDER BY global_position;
      INSERT INTO security_audit_events SELECT o.audit_event_id, o.start_id, o.run_id, o.step_run_id, o.audit_event_digest, e.data_json, o.committed_at_ms
        FROM src.security_audit_events o JOIN src.events e ON e.event_id = 'audit:' || o.audit_event_id;
      INSERT INTO trace_anchors SELECT o.trace_id, o.span_id, o.start_id, o.run_id, o.step_run_id, o.trace_digest, e.data_json, o.committed_at_ms
        FROM src.trace_anchors o JOIN src.events e ON e.event_id = 'trace:' || o.trace_id;
      INSERT INTO audit_receipts SELECT o.audit_receipt_id, o.audit_event_id, o.trace_id, o.start_id, o.receipt_digest, e.data_json, o.committed_at_ms
        FROM src.audit_receipts o JOIN src.events e ON e.event_id = 'receipt:' || o.audit_receipt_id;
      INSERT INTO step_run_mutations SELECT o.mutation_id, o.run_event_id, o.start_id, o.run_id, o.step_run_id, o.from_status, o.to_status, o.from_version,
          o.to_version, o.run_event_sequence, o.mutation_digest, o.started_step_run_digest, e.data_json, o.requested_at_ms, o.committed_at_ms
        FROM src.step_run_mutations o JOIN src.events e ON e.event_id = o.run_event_id;
      INSERT INTO tool_execution_start_barriers SELECT o.start_id, o.command_digest, o.barrier_digest, json_extract(e.data_json, '$.barrier'), o.project_id,
          o.run_id, o.step_run_id, o.started_step_run_version, o.started_step_run_digest, o.mutation_id, o.mutation_digest, o.run_event_id, o.trace_id,
          o.trace_digest, o.audit_event_id, o.audit_receipt_id, o.audit_receipt_digest, o.adapter_id, o.committed_at_ms
        FROM src.tool_execution_start_barriers o JOIN src.events e ON e.event_id = 'barrier:' || o.start_id;
      INSERT INTO start_replay_identities (identity, value, start_id, command_digest)
        SELECT 'startId', start_id, start_id, command_digest FROM tool_execution_start_barriers
        UNION ALL SELECT 'mutationId', mutation_id, start_id, command_digest FROM tool_execution_start_barriers
        UNION ALL SELECT 'runEventId', run_event_id, start_id, command_digest FROM tool_execution_start_barriers
        UNION ALL SELECT 'traceId', trace_id, start_id, command_digest FROM tool_execution_start_barriers
        UNION ALL SELECT 'auditEventId', audit_event_id, start_id, command_digest FROM tool_execution_start_barriers
        UNION ALL SELECT 'auditReceiptId', audit_receipt_id, start_id, command_digest FROM tool_execution_start_barriers
        UNION ALL SELECT 'attempt', json_array(run_id, step_run_id, started_step_run_version), start_id, command_digest FROM tool_execution_start_barriers;
    `);
    db.exec('COMMIT');
    db.exec('DETACH DATABASE src');
  } finally {
    db.close();
  }
};
