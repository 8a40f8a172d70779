// Hand-written SQL for the SQLite baselines and bulk seeding: plain INSERTs and UPDATEs of the
// rows a start writes, with no reads and no checks (the database's own constraints still run:
// that is the physical floor the product is compared with).

export const INSERT_STREAM = 'INSERT INTO streams (stream_id, stream_type, version) VALUES (@stream_id, @stream_type, @version)';
export const INSERT_EVENT = `INSERT INTO events (stream_id, stream_position, event_id, event_type, data_json, committed_at_ms)
  VALUES (@stream_id, @stream_position, @event_id, @event_type, @data_json, @committed_at_ms)`;
export const INSERT_RUN = `INSERT INTO runs (run_id, project_id, snapshot_id, snapshot_digest, version)
  VALUES (@run_id, @project_id, @snapshot_id, @snapshot_digest, @version)`;
export const INSERT_STEP_RUN = `INSERT INTO step_runs (run_id, step_run_id, project_id, kind, status, version, digest, state_json)
  VALUES (@run_id, @step_run_id, @project_id, @kind, @status, @version, @digest, @state_json)`;
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
export const INSERT_IDENTITY = `INSERT INTO start_replay_identities (identity, value, start_id, command_digest)
  VALUES (@identity, @value, @start_id, @command_digest)`;
export const UPDATE_STEP_RUN = `UPDATE step_runs SET status = @status, version = @version, digest = @digest, state_json = @state_json
  WHERE run_id = @run_id AND step_run_id = @step_run_id`;
export const UPDATE_STREAM = 'UPDATE streams SET version = ? WHERE stream_id = ?';
export const UPDATE_RUN = 'UPDATE runs SET version = ? WHERE run_id = ?';

/** The commit floor: one tiny row per transaction. */
export const CREATE_FLOOR = 'CREATE TABLE IF NOT EXISTS bench_commit_floor (id INTEGER PRIMARY KEY, v TEXT NOT NULL) STRICT';
export const INSERT_FLOOR = 'INSERT INTO bench_commit_floor (v) VALUES (?)';

/** One indexed point read of a stored barrier (the "prepared get" the replay is compared with). */
export const GET_BARRIER = 'SELECT * FROM tool_execution_start_barriers WHERE start_id = ?';
