-- Each fact stored once. The canonical JSON of every start record lives in one place: the data
-- of its event (ql3.events.data_json), which is chained (R9.2) and which every verified read
-- already fetches. The per-kind tables keep their mirror columns and their keys, the references
-- by which a read finds the event (audit:<auditEventId>, trace:<traceId>, receipt:<auditReceiptId>,
-- the RunEvent id, barrier:<startId>), and lose their copies of the JSON (event_json,
-- anchor_json, receipt_json, mutation_json, barrier_json). R5.3 is unchanged: a read checks the
-- event's JSON against every mirror column and recomputes every digest.
--
-- Each R4.1 identity is enforced once, by the replay index (start_replay_identities_key). The
-- nine unique constraints that repeated it go: audit_receipts (audit_event_id), (trace_id);
-- step_run_mutations (run_event_id); the barrier's mutation_id, run_event_id, trace_id,
-- audit_event_id, audit_receipt_id and (run_id, step_run_id, started_step_run_version).
-- Kept, and why:
--   * the primary keys of the four fact tables and of the barrier: they are the targets of the
--     foreign keys R5.1 / R5.2 name (barrier -> mutation, Trace, Audit event, Audit receipt;
--     receipt -> Audit event, Trace; replay index, outcomes, driver claims, MACs -> barrier), and
--     the access path of the verified read. A foreign key needs a unique parent key, so these are
--     the tables' own keys, not a second check of an identity.
--   * a plain (non-unique) index on the barrier's attempt columns: R5.4's lookup by attempt reads
--     both the replay index and the barrier side, so a missing or stray row fails closed (R9.3)
--     at constant cost; uniqueness of the attempt is the replay index's alone.
--
-- Data moved forward: the copies are dropped only after proving that each equals its event's
-- data byte for byte; a store where one differs is refused (the migration fails) rather than
-- lose the evidence of the difference. DROP COLUMN leaves the old rows' bytes in place until
-- the table is next rewritten (VACUUM FULL); every row written from now on is without them.
-- Grants are unchanged (ql3_runtime: SELECT, INSERT), and so are the append-only triggers.
-- The SQLite twin is 0080-each-fact-stored-once.
SET LOCAL ROLE ql3_owner;

DO $check$
DECLARE
  differs text;
BEGIN
  SELECT what INTO differs FROM (
    SELECT 'audit event ' || o.audit_event_id AS what FROM ql3.security_audit_events o
      LEFT JOIN ql3.events e ON e.event_id = 'audit:' || o.audit_event_id WHERE e.data_json IS DISTINCT FROM o.event_json
    UNION ALL
    SELECT 'trace anchor ' || o.trace_id FROM ql3.trace_anchors o
      LEFT JOIN ql3.events e ON e.event_id = 'trace:' || o.trace_id WHERE e.data_json IS DISTINCT FROM o.anchor_json
    UNION ALL
    SELECT 'audit receipt ' || o.audit_receipt_id FROM ql3.audit_receipts o
      LEFT JOIN ql3.events e ON e.event_id = 'receipt:' || o.audit_receipt_id WHERE e.data_json IS DISTINCT FROM o.receipt_json
    UNION ALL
    SELECT 'mutation ' || o.mutation_id FROM ql3.step_run_mutations o
      LEFT JOIN ql3.events e ON e.event_id = o.run_event_id WHERE e.data_json IS DISTINCT FROM o.mutation_json
    UNION ALL
    SELECT 'barrier ' || o.start_id FROM ql3.tool_execution_start_barriers o
      LEFT JOIN ql3.events e ON e.event_id = 'barrier:' || o.start_id
     WHERE e.data_json IS DISTINCT FROM '{"barrier":' || o.barrier_json || ',"barrierDigest":' || to_json(o.barrier_digest)::text || '}'
  ) d LIMIT 1;
  IF differs IS NOT NULL THEN
    RAISE EXCEPTION 'a_stored_json_differs_from_its_event: %', differs;
  END IF;
END
$check$;

ALTER TABLE ql3.security_audit_events DROP COLUMN event_json;
ALTER TABLE ql3.trace_anchors DROP COLUMN anchor_json;
ALTER TABLE ql3.audit_receipts
  DROP CONSTRAINT audit_receipts_audit_event_id_key,
  DROP CONSTRAINT audit_receipts_trace_id_key,
  DROP COLUMN receipt_json;
ALTER TABLE ql3.step_run_mutations
  DROP CONSTRAINT step_run_mutations_run_event_id_key,
  DROP COLUMN mutation_json;
ALTER TABLE ql3.tool_execution_start_barriers
  DROP CONSTRAINT tool_execution_start_barriers_mutation_id_key,
  DROP CONSTRAINT tool_execution_start_barriers_run_event_id_key,
  DROP CONSTRAINT tool_execution_start_barriers_trace_id_key,
  DROP CONSTRAINT tool_execution_start_barriers_audit_event_id_key,
  DROP CONSTRAINT tool_execution_start_barriers_audit_receipt_id_key,
  DROP CONSTRAINT tool_execution_start_barriers_attempt_key,
  DROP COLUMN barrier_json;

CREATE INDEX tool_execution_start_barriers_attempt ON ql3.tool_execution_start_barriers (run_id, step_run_id, started_step_run_version);
