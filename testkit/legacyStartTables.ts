// A fixed baseline: the five start tables of SQLite as they were before each fact was stored
// once (0080), with their JSON copies and the nine unique constraints that repeated the replay
// index, their triggers and index, and the INSERTs a start made into them. The bench measures the
// bare same-rows transaction on this schema beside the one the product uses now, and the specs
// take a store back to it to upgrade it again. Never derived from the product's SQL: it must not
// move when the product does. Run inside a transaction with deferred foreign keys, after the
// five tables were dropped.

export const START_TABLES_BEFORE_STORED_ONCE = `
  CREATE TABLE security_audit_events (audit_event_id TEXT NOT NULL PRIMARY KEY, start_id TEXT NOT NULL, run_id TEXT NOT NULL, step_run_id TEXT NOT NULL,
    audit_event_digest TEXT NOT NULL, event_json TEXT NOT NULL, committed_at_ms INTEGER NOT NULL) STRICT;
  CREATE TABLE trace_anchors (trace_id TEXT NOT NULL PRIMARY KEY, span_id TEXT NOT NULL, start_id TEXT NOT NULL, run_id TEXT NOT NULL, step_run_id TEXT NOT NULL,
    trace_digest TEXT NOT NULL, anchor_json TEXT NOT NULL, committed_at_ms INTEGER NOT NULL) STRICT;
  CREATE TABLE audit_receipts (audit_receipt_id TEXT NOT NULL PRIMARY KEY, audit_event_id TEXT NOT NULL UNIQUE REFERENCES security_audit_events (audit_event_id),
    trace_id TEXT NOT NULL UNIQUE REFERENCES trace_anchors (trace_id), start_id TEXT NOT NULL, receipt_digest TEXT NOT NULL, receipt_json TEXT NOT NULL,
    committed_at_ms INTEGER NOT NULL) STRICT;
  CREATE TABLE step_run_mutations (mutation_id TEXT NOT NULL PRIMARY KEY, run_event_id TEXT NOT NULL UNIQUE REFERENCES events (event_id), start_id TEXT NOT NULL,
    run_id TEXT NOT NULL, step_run_id TEXT NOT NULL, from_status TEXT NOT NULL, to_status TEXT NOT NULL CHECK (to_status = 'running'), from_version INTEGER NOT NULL,
    to_version INTEGER NOT NULL CHECK (to_version = from_version + 1), run_event_sequence INTEGER NOT NULL, mutation_digest TEXT NOT NULL,
    started_step_run_digest TEXT NOT NULL, mutation_json TEXT NOT NULL, requested_at_ms INTEGER NOT NULL, committed_at_ms INTEGER NOT NULL,
    FOREIGN KEY (run_id, step_run_id) REFERENCES step_runs (run_id, step_run_id)) STRICT;
  CREATE TABLE tool_execution_start_barriers (start_id TEXT NOT NULL PRIMARY KEY, command_digest TEXT NOT NULL, barrier_digest TEXT NOT NULL, barrier_json TEXT NOT NULL,
    project_id TEXT NOT NULL, run_id TEXT NOT NULL, step_run_id TEXT NOT NULL, started_step_run_version INTEGER NOT NULL, started_step_run_digest TEXT NOT NULL,
    mutation_id TEXT NOT NULL UNIQUE REFERENCES step_run_mutations (mutation_id), mutation_digest TEXT NOT NULL,
    run_event_id TEXT NOT NULL UNIQUE REFERENCES events (event_id), trace_id TEXT NOT NULL UNIQUE REFERENCES trace_anchors (trace_id), trace_digest TEXT NOT NULL,
    audit_event_id TEXT NOT NULL UNIQUE REFERENCES security_audit_events (audit_event_id), audit_receipt_id TEXT NOT NULL UNIQUE REFERENCES audit_receipts (audit_receipt_id),
    audit_receipt_digest TEXT NOT NULL, adapter_id TEXT NOT NULL, committed_at_ms INTEGER NOT NULL, UNIQUE (run_id, step_run_id, started_step_run_version),
    FOREIGN KEY (run_id, step_run_id) REFERENCES step_runs (run_id, step_run_id)) STRICT;
  ${['security_audit_events', 'trace_anchors', 'audit_receipts', 'step_run_mutations', 'tool_execution_start_barriers']
    .map((t) => `CREATE TRIGGER ${t}_no_update BEFORE UPDATE ON ${t} BEGIN SELECT RAISE(ABORT, 'append-only'); END;
  CREATE TRIGGER ${t}_no_delete BEFORE DELETE ON ${t} BEGIN SELECT RAISE(ABORT, 'append-only'); END;`)
    .join('\n  ')}
  ${['security_audit_events', 'trace_anchors', 'audit_receipts', 'step_run_mutations']
    .map((t) => `CREATE TRIGGER ${t}_start_whole AFTER INSERT ON ${t} BEGIN INSERT OR IGNORE INTO start_whole_at_commit (start_id) VALUES (NEW.start_id); END;`)
    .join('\n  ')}
  CREATE TRIGGER tool_execution_start_barriers_with_event BEFORE INSERT ON tool_execution_start_barriers
  BEGIN
    SELECT RAISE(ABORT, 'illegal history refused: a barrier row without its barrier event (R9.1)')
     WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.event_id = 'barrier:' || NEW.start_id AND json_extract(e.data_json, '$.barrierDigest') = NEW.barrier_digest);
  END;
  CREATE INDEX step_run_mutations_start ON step_run_mutations (start_id);
`;

export const DROP_START_TABLES = `DROP TABLE tool_execution_start_barriers; DROP TABLE step_run_mutations; DROP TABLE audit_receipts;
  DROP TABLE trace_anchors; DROP TABLE security_audit_events;`;

/** An empty, migrated store with the start tables taken back to before 0080 (the bench's fixed baseline). */
export const SCHEMA_BEFORE_STORED_ONCE = `BEGIN; PRAGMA defer_foreign_keys = ON; ${DROP_START_TABLES} ${START_TABLES_BEFORE_STORED_ONCE} COMMIT;`;

export const INSERT_AUDIT = `INSERT INTO security_audit_events (audit_event_id, start_id, run_id, step_run_id, audit_event_digest, event_json, committed_at_ms)
  VALUES (@audit_event_id, @start_id, @run_id, @step_run_id, @audit_event_digest, @event_json, @committed_at_ms)`;
export const INSERT_TRACE = `INSERT INTO trace_anchors (trace_id, span_id, start_id, run_id, step_run_id, trace_digest, anchor_json, committed_at_ms)
  VALUES (@trace_id, @span_id, @start_id, @run_id, @step_run_id, @trace_digest, @anchor_json, @committed_at_ms)`;
export const INSERT_RECEIPT = `INSERT INTO audit_receipts (audit_receipt_id, audit_event_id, trace_id, start_id, receipt_digest, receipt_json, committed_at_ms)
  VALUES (@audit_receipt_id, @audit_event_id, @trace_id, @start_id, @receipt_digest, @receipt_json, @committed_at_ms)`;
export const INSERT_MUTATION = `INSERT INTO step_run_mutations (mutation_id, run_event_id, start_id, run_id, step_run_id, from_status, to_status,
    from_version, to_version, run_event_sequence, mutation_digest, started_step_run_digest, mutation_json, requested_at_ms, committed_at_ms)
  VALUES (@mutation_id, @run_event_id, @start_id, @run_id, @step_run_id, @from_status, @to_status,
    @from_version, @to_version, @run_event_sequence, @mutation_digest, @started_step_run_digest, @mutation_json, @requested_at_ms, @committed_at_ms)`;
export const INSERT_BARRIER = `INSERT INTO tool_execution_start_barriers (start_id, command_digest, barrier_digest, barrier_json, project_id, run_id,
    step_run_id, started_step_run_version, started_step_run_digest, mutation_id, mutation_digest, run_event_id, trace_id, trace_digest,
    audit_event_id, audit_receipt_id, audit_receipt_digest, adapter_id, committed_at_ms)
  VALUES (@start_id, @command_digest, @barrier_digest, @barrier_json, @project_id, @run_id,
    @step_run_id, @started_step_run_version, @started_step_run_digest, @mutation_id, @mutation_digest, @run_event_id, @trace_id, @trace_digest,
    @audit_event_id, @audit_receipt_id, @audit_receipt_digest, @adapter_id, @committed_at_ms)`;

/**
 * The replay index's table and indexes as 0055 made them, before 0081 compacted it: each row
 * repeats its start's command digest, and start_id has its own index. Fixed for the same reason.
 */
export const REPLAY_INDEX_TABLE_BEFORE_COMPACT = `
  CREATE TABLE start_replay_identities (
    identity       TEXT NOT NULL CHECK (identity IN ('startId', 'mutationId', 'runEventId', 'traceId', 'auditEventId', 'auditReceiptId', 'attempt')),
    value          TEXT NOT NULL,
    start_id       TEXT NOT NULL REFERENCES tool_execution_start_barriers (start_id),
    command_digest TEXT NOT NULL
  ) STRICT;`;
export const REPLAY_INDEX_INDEXES_BEFORE_COMPACT = `
  CREATE UNIQUE INDEX start_replay_identities_key ON start_replay_identities (identity, value);
  CREATE INDEX start_replay_identities_start ON start_replay_identities (start_id);`;
