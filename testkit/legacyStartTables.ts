// A fixed baseline: the PostgreSQL start tables as they were before each fact was stored once
// (pg-0050), with their JSON copies and the unique constraints that repeated the replay index.
// The bench measures the bare same-rows transaction on this schema beside the one the product
// uses now, and the specs take a store back to it to upgrade it again. Never derived from the
// product's SQL: it must not move when the product does.

// PostgreSQL: the start tables before pg-0050, in three steps, so a spec can fill the copies of a
// store with data between them (the bench's empty baseline needs only the first and the last).
export const PG_ADD_JSON_COPIES = `
  ALTER TABLE ql3.security_audit_events ADD COLUMN event_json text;
  ALTER TABLE ql3.trace_anchors ADD COLUMN anchor_json text;
  ALTER TABLE ql3.audit_receipts ADD COLUMN receipt_json text;
  ALTER TABLE ql3.step_run_mutations ADD COLUMN mutation_json text;
  ALTER TABLE ql3.tool_execution_start_barriers ADD COLUMN barrier_json text;
`;
/** Every copy from its event's data (the barrier's from inside `{ barrier, barrierDigest }`). Needs the append-only triggers off. */
export const PG_FILL_JSON_COPIES = `
  UPDATE ql3.security_audit_events o SET event_json = e.data_json FROM ql3.events e WHERE e.event_id = 'audit:' || o.audit_event_id;
  UPDATE ql3.trace_anchors o SET anchor_json = e.data_json FROM ql3.events e WHERE e.event_id = 'trace:' || o.trace_id;
  UPDATE ql3.audit_receipts o SET receipt_json = e.data_json FROM ql3.events e WHERE e.event_id = 'receipt:' || o.audit_receipt_id;
  UPDATE ql3.step_run_mutations o SET mutation_json = e.data_json FROM ql3.events e WHERE e.event_id = o.run_event_id;
  UPDATE ql3.tool_execution_start_barriers o SET barrier_json = (e.data_json::json -> 'barrier')::text FROM ql3.events e WHERE e.event_id = 'barrier:' || o.start_id;
`;
export const PG_RESTORE_REPEATED_KEYS = `
  ALTER TABLE ql3.security_audit_events ALTER COLUMN event_json SET NOT NULL;
  ALTER TABLE ql3.trace_anchors ALTER COLUMN anchor_json SET NOT NULL;
  ALTER TABLE ql3.audit_receipts ALTER COLUMN receipt_json SET NOT NULL,
    ADD CONSTRAINT audit_receipts_audit_event_id_key UNIQUE (audit_event_id), ADD CONSTRAINT audit_receipts_trace_id_key UNIQUE (trace_id);
  ALTER TABLE ql3.step_run_mutations ALTER COLUMN mutation_json SET NOT NULL, ADD CONSTRAINT step_run_mutations_run_event_id_key UNIQUE (run_event_id);
  DROP INDEX ql3.tool_execution_start_barriers_attempt;
  ALTER TABLE ql3.tool_execution_start_barriers ALTER COLUMN barrier_json SET NOT NULL,
    ADD CONSTRAINT tool_execution_start_barriers_mutation_id_key UNIQUE (mutation_id),
    ADD CONSTRAINT tool_execution_start_barriers_run_event_id_key UNIQUE (run_event_id),
    ADD CONSTRAINT tool_execution_start_barriers_trace_id_key UNIQUE (trace_id),
    ADD CONSTRAINT tool_execution_start_barriers_audit_event_id_key UNIQUE (audit_event_id),
    ADD CONSTRAINT tool_execution_start_barriers_audit_receipt_id_key UNIQUE (audit_receipt_id),
    ADD CONSTRAINT tool_execution_start_barriers_attempt_key UNIQUE (run_id, step_run_id, started_step_run_version);
`;
