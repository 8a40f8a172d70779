// Hand-written SQL for the SQLite baselines and bulk seeding: plain INSERTs and UPDATEs of the
// rows a start writes, with no reads and no checks (the database's own constraints still run:
// that is the physical floor the product is compared with). The fact INSERTs are the product's
// own statements, so the baseline writes exactly what a start writes.
export { INSERT_RUN, INSERT_AUDIT, INSERT_TRACE, INSERT_RECEIPT, INSERT_MUTATION, INSERT_BARRIER } from '../../infrastructure/sqlite/sql';

export const INSERT_STREAM = 'INSERT INTO streams (stream_id, stream_type, version) VALUES (@stream_id, @stream_type, @version)';
export const INSERT_EVENT = `INSERT INTO events (stream_id, stream_position, event_id, event_type, data_json, committed_at_ms, chain_digest)
  VALUES (@stream_id, @stream_position, @event_id, @event_type, @data_json, @committed_at_ms, @chain_digest)`;
export const INSERT_STEP_RUN = `INSERT INTO step_runs (run_id, step_run_id, project_id, kind, status, version, digest, state_json)
  VALUES (@run_id, @step_run_id, @project_id, @kind, @status, @version, @digest, @state_json)`;
export const UPDATE_STEP_RUN = `UPDATE step_runs SET status = @status, version = @version, digest = @digest, state_json = @state_json
  WHERE run_id = @run_id AND step_run_id = @step_run_id`;
export const UPDATE_STREAM = 'UPDATE streams SET version = ? WHERE stream_id = ?';
export const UPDATE_RUN = 'UPDATE runs SET version = ? WHERE run_id = ?';

/** The commit floor: one tiny row per transaction. */
export const CREATE_FLOOR = 'CREATE TABLE IF NOT EXISTS bench_commit_floor (id INTEGER PRIMARY KEY, v TEXT NOT NULL) STRICT';
export const INSERT_FLOOR = 'INSERT INTO bench_commit_floor (v) VALUES (?)';

/** One indexed point read of a stored barrier (the "prepared get" the replay is compared with). */
export const GET_BARRIER = 'SELECT * FROM tool_execution_start_barriers WHERE start_id = ?';
