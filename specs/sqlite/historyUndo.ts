import { DROP_START_TABLES, REPLAY_INDEX_INDEXES_BEFORE_COMPACT, REPLAY_INDEX_TABLE_BEFORE_COMPACT, START_TABLES_BEFORE_STORED_ONCE } from '../../testkit/legacyStartTables';

// What 0080 changes, taken back: the five start tables with their JSON copies (filled again from
// the events, the one place 0080 keeps it), their repeated unique constraints, and every trigger
// and index 0003, 0055, 0057 and 0063 put on them (testkit/legacyStartTables.ts). Foreign keys are
// deferred while they are rebuilt.
// What 0084 changes, taken back: the StepRun version index and the trigger that reads it.
// What 0085 .. 0090 change, taken back: the driver claim rules' trigger, the outcome row's, the
// replay index's (written by the barrier's insert, refused otherwise), the fact rows' (each
// beside its event), the start's (it follows the log) and the claim lease bound's.
// Each undo sets the header's user_version back with the ledger rows it deletes: an open refuses
// a ledger that ends before the migration the header names.
// What 0093 adds, taken back: the invocation plans. What 0092 adds: the in-doubt index, its
// triggers and the running StepRuns' index.
// What 0083 changes, taken back: start_whole_at_commit as the rowid table 0063 made.
// And what 0091 adds (run again after them): the position trigger and the origin's free positions.
// What 0094 adds: the compaction tables and the retention gate on each delete guard (the guards as they were).
export const UNDO_WHOLE_START_KEYED = `
  BEGIN;
  DROP TABLE compacted_identities;
  DROP TABLE run_compactions;
  DROP TRIGGER streams_not_compacted;
  DROP TRIGGER events_no_delete; CREATE TRIGGER events_no_delete BEFORE DELETE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
  DROP TRIGGER start_outcomes_no_delete; CREATE TRIGGER start_outcomes_no_delete BEFORE DELETE ON start_outcomes BEGIN SELECT RAISE(ABORT, 'start outcomes are facts: append a new event instead'); END;
  DROP TRIGGER resolution_notes_no_delete; CREATE TRIGGER resolution_notes_no_delete BEFORE DELETE ON resolution_notes BEGIN SELECT RAISE(ABORT, 'a resolution note is purged, never deleted: its digest stays bound'); END;
  DROP TRIGGER adapter_driver_claims_no_delete; CREATE TRIGGER adapter_driver_claims_no_delete BEFORE DELETE ON adapter_driver_claims BEGIN SELECT RAISE(ABORT, 'driver claims are facts: append a new generation instead'); END;
  DROP TRIGGER streams_no_delete; CREATE TRIGGER streams_no_delete BEFORE DELETE ON streams BEGIN SELECT RAISE(ABORT, 'illegal history refused: a stream head is never deleted (R9.1)'); END;
  DROP TRIGGER runs_no_delete; CREATE TRIGGER runs_no_delete BEFORE DELETE ON runs BEGIN SELECT RAISE(ABORT, 'illegal history refused: a Run head is never deleted (R9.1)'); END;
  DROP TRIGGER step_runs_no_delete; CREATE TRIGGER step_runs_no_delete BEFORE DELETE ON step_runs BEGIN SELECT RAISE(ABORT, 'illegal history refused: a StepRun is never deleted (R9.1)'); END;
  DROP TRIGGER start_evidence_macs_no_delete; CREATE TRIGGER start_evidence_macs_no_delete BEFORE DELETE ON start_evidence_macs BEGIN SELECT RAISE(ABORT, 'evidence MACs are immutable'); END;
  DROP TRIGGER run_event_macs_no_delete; CREATE TRIGGER run_event_macs_no_delete BEFORE DELETE ON run_event_macs BEGIN SELECT RAISE(ABORT, 'event seals are immutable'); END;
  DROP TRIGGER security_audit_events_no_delete; CREATE TRIGGER security_audit_events_no_delete BEFORE DELETE ON security_audit_events BEGIN SELECT RAISE(ABORT, 'security audit events are append-only'); END;
  DROP TRIGGER trace_anchors_no_delete; CREATE TRIGGER trace_anchors_no_delete BEFORE DELETE ON trace_anchors BEGIN SELECT RAISE(ABORT, 'trace anchors are append-only'); END;
  DROP TRIGGER audit_receipts_no_delete; CREATE TRIGGER audit_receipts_no_delete BEFORE DELETE ON audit_receipts BEGIN SELECT RAISE(ABORT, 'audit receipts are append-only'); END;
  DROP TRIGGER step_run_mutations_no_delete; CREATE TRIGGER step_run_mutations_no_delete BEFORE DELETE ON step_run_mutations BEGIN SELECT RAISE(ABORT, 'the mutation ledger is append-only'); END;
  DROP TRIGGER tool_execution_start_barriers_no_delete; CREATE TRIGGER tool_execution_start_barriers_no_delete BEFORE DELETE ON tool_execution_start_barriers BEGIN SELECT RAISE(ABORT, 'start barriers are immutable'); END;
  DROP TRIGGER start_replay_identities_no_delete; CREATE TRIGGER start_replay_identities_no_delete BEFORE DELETE ON start_replay_identities BEGIN SELECT RAISE(ABORT, 'replay identities are immutable'); END;
  DROP TABLE invocation_plans;
  DROP TABLE in_doubt_starts;
  DROP INDEX step_runs_running;
  DROP TRIGGER in_doubt_starts_from_barrier;
  DROP TRIGGER in_doubt_starts_leave_on_outcome;
  DROP TRIGGER events_position_is_next;
  ALTER TABLE run_event_seal_origins DROP COLUMN legacy_gaps;
  DROP TRIGGER events_start_follows_log;
  DROP TRIGGER security_audit_events_beside_their_event;
  DROP TRIGGER trace_anchors_beside_their_event;
  DROP TRIGGER audit_receipts_beside_their_event;
  DROP TRIGGER step_run_mutations_beside_their_event;
  DROP TRIGGER tool_execution_start_barriers_index;
  DROP TRIGGER start_replay_identities_from_barrier;
  DROP TRIGGER adapter_driver_claims_follow_rules;
  DROP TRIGGER adapter_driver_claims_lease_bound;
  DROP TRIGGER start_outcomes_project_their_event;
  DROP TRIGGER events_step_run_follows_log;
  DROP INDEX events_step_run_version;
  CREATE TEMP TABLE u_whole AS SELECT start_id FROM start_whole_at_commit ORDER BY start_id;
  DROP TABLE start_whole_at_commit;
  CREATE TABLE start_whole_at_commit (
    start_id TEXT NOT NULL PRIMARY KEY REFERENCES tool_execution_start_barriers (start_id) DEFERRABLE INITIALLY DEFERRED
  ) STRICT;
  INSERT INTO start_whole_at_commit SELECT start_id FROM temp.u_whole ORDER BY rowid;
  DROP TABLE temp.u_whole;
  DELETE FROM schema_migrations WHERE name >= '0083'; PRAGMA user_version = 82;
  COMMIT;
`;

// What 0082 changes, taken back: the replay index as a rowid table with its unique index on
// (identity, value), as 0081 left it, rows in key order.
export const UNDO_KEYED_INDEX = `${UNDO_WHOLE_START_KEYED}
  BEGIN;
  CREATE TEMP TABLE u_keyed AS SELECT identity, value, start_id FROM start_replay_identities ORDER BY identity, value;
  DROP TABLE start_replay_identities;
  CREATE TABLE start_replay_identities (
    identity TEXT NOT NULL CHECK (identity IN ('startId', 'mutationId', 'runEventId', 'traceId', 'auditEventId', 'auditReceiptId', 'attempt')),
    value    TEXT NOT NULL,
    start_id TEXT NOT NULL REFERENCES tool_execution_start_barriers (start_id)) STRICT;
  INSERT INTO start_replay_identities SELECT identity, value, start_id FROM temp.u_keyed ORDER BY rowid;
  DROP TABLE temp.u_keyed;
  CREATE UNIQUE INDEX start_replay_identities_key ON start_replay_identities (identity, value);
  CREATE TRIGGER start_replay_identities_no_update BEFORE UPDATE ON start_replay_identities BEGIN SELECT RAISE(ABORT, 'replay identities are immutable'); END;
  CREATE TRIGGER start_replay_identities_no_delete BEFORE DELETE ON start_replay_identities BEGIN SELECT RAISE(ABORT, 'replay identities are immutable'); END;
  DELETE FROM schema_migrations WHERE name >= '0082'; PRAGMA user_version = 81;
  COMMIT;
`;

// What 0081 changes, taken back: the replay index's command digest (filled again from the
// barrier each row names), its start_id index and its triggers, as 0055 made them.
export const UNDO_COMPACT_INDEX = `${UNDO_KEYED_INDEX}
  BEGIN;
  CREATE TEMP TABLE u_identities AS SELECT i.identity, i.value, i.start_id, b.command_digest
    FROM start_replay_identities i JOIN tool_execution_start_barriers b ON b.start_id = i.start_id ORDER BY i.rowid;
  DROP TABLE start_replay_identities;
  ${REPLAY_INDEX_TABLE_BEFORE_COMPACT}
  INSERT INTO start_replay_identities SELECT * FROM temp.u_identities ORDER BY rowid;
  DROP TABLE temp.u_identities;
  ${REPLAY_INDEX_INDEXES_BEFORE_COMPACT}
  CREATE TRIGGER start_replay_identities_no_update BEFORE UPDATE ON start_replay_identities BEGIN SELECT RAISE(ABORT, 'replay identities are immutable'); END;
  CREATE TRIGGER start_replay_identities_no_delete BEFORE DELETE ON start_replay_identities BEGIN SELECT RAISE(ABORT, 'replay identities are immutable'); END;
  DELETE FROM schema_migrations WHERE name >= '0081'; PRAGMA user_version = 80;
  COMMIT;
`;

export const UNDO_STORED_ONCE = `${UNDO_COMPACT_INDEX}
  BEGIN; PRAGMA defer_foreign_keys = ON;
  CREATE TEMP TABLE u_audit AS SELECT o.*, e.data_json AS event_json FROM security_audit_events o JOIN events e ON e.event_id = 'audit:' || o.audit_event_id ORDER BY o.rowid;
  CREATE TEMP TABLE u_trace AS SELECT o.*, e.data_json AS anchor_json FROM trace_anchors o JOIN events e ON e.event_id = 'trace:' || o.trace_id ORDER BY o.rowid;
  CREATE TEMP TABLE u_receipt AS SELECT o.*, e.data_json AS receipt_json FROM audit_receipts o JOIN events e ON e.event_id = 'receipt:' || o.audit_receipt_id ORDER BY o.rowid;
  CREATE TEMP TABLE u_mutation AS SELECT o.*, e.data_json AS mutation_json FROM step_run_mutations o JOIN events e ON e.event_id = o.run_event_id ORDER BY o.rowid;
  CREATE TEMP TABLE u_barrier AS SELECT o.*, substr(e.data_json, 12, length(e.data_json) - 11 - length(',"barrierDigest":' || json_quote(o.barrier_digest) || '}')) AS barrier_json
    FROM tool_execution_start_barriers o JOIN events e ON e.event_id = 'barrier:' || o.start_id ORDER BY o.rowid;
  ${DROP_START_TABLES}
  ${START_TABLES_BEFORE_STORED_ONCE}
  INSERT INTO security_audit_events SELECT audit_event_id, start_id, run_id, step_run_id, audit_event_digest, event_json, committed_at_ms FROM temp.u_audit ORDER BY rowid;
  INSERT INTO trace_anchors SELECT trace_id, span_id, start_id, run_id, step_run_id, trace_digest, anchor_json, committed_at_ms FROM temp.u_trace ORDER BY rowid;
  INSERT INTO audit_receipts SELECT audit_receipt_id, audit_event_id, trace_id, start_id, receipt_digest, receipt_json, committed_at_ms FROM temp.u_receipt ORDER BY rowid;
  INSERT INTO step_run_mutations SELECT mutation_id, run_event_id, start_id, run_id, step_run_id, from_status, to_status, from_version, to_version, run_event_sequence,
    mutation_digest, started_step_run_digest, mutation_json, requested_at_ms, committed_at_ms FROM temp.u_mutation ORDER BY rowid;
  INSERT INTO tool_execution_start_barriers SELECT start_id, command_digest, barrier_digest, barrier_json, project_id, run_id, step_run_id, started_step_run_version,
    started_step_run_digest, mutation_id, mutation_digest, run_event_id, trace_id, trace_digest, audit_event_id, audit_receipt_id, audit_receipt_digest, adapter_id,
    committed_at_ms FROM temp.u_barrier ORDER BY rowid;
  DROP TABLE temp.u_audit; DROP TABLE temp.u_trace; DROP TABLE temp.u_receipt; DROP TABLE temp.u_mutation; DROP TABLE temp.u_barrier;
  DELETE FROM schema_migrations WHERE name >= '0080'; PRAGMA user_version = 73;
  COMMIT;
`;

// What 0061 .. 0063 (and 0072, 0073, which build on them) add, taken away again: a spec that rolls a store back to before them (as
// written by the code before the chain and the history triggers) and lets the migrator upgrade
// it. Their schema_migrations rows are deleted by the caller.
export const UNDO_HISTORY_MIGRATIONS = `${UNDO_STORED_ONCE}
  DROP TRIGGER events_legal_append; DROP TRIGGER streams_legal_move; DROP TRIGGER streams_no_delete;
  DROP TRIGGER runs_legal_move; DROP TRIGGER runs_no_delete; DROP TRIGGER step_runs_legal_move; DROP TRIGGER step_runs_no_delete;
  DROP TRIGGER events_start_whole; DROP TRIGGER security_audit_events_start_whole; DROP TRIGGER trace_anchors_start_whole;
  DROP TRIGGER audit_receipts_start_whole; DROP TRIGGER step_run_mutations_start_whole; DROP TRIGGER tool_execution_start_barriers_with_event;
  DROP TRIGGER IF EXISTS events_step_run_from_head;
  DROP TABLE start_whole_at_commit;
  ALTER TABLE events DROP COLUMN chain_digest;
  DROP TRIGGER adapter_driver_claims_digest_required; ALTER TABLE adapter_driver_claims DROP COLUMN claim_digest;
  DROP TRIGGER resolution_notes_purge_only; ALTER TABLE resolution_notes DROP COLUMN purge_digest;
  CREATE TRIGGER resolution_notes_purge_only BEFORE UPDATE ON resolution_notes
    WHEN NOT (OLD.note_text IS NOT NULL AND NEW.note_text IS NULL AND NEW.purged_at_ms IS NOT NULL
              AND NEW.start_id = OLD.start_id AND NEW.note_digest = OLD.note_digest)
    BEGIN SELECT RAISE(ABORT, 'a resolution note can only be purged'); END;
  ALTER TABLE schema_migrations DROP COLUMN ledger_digest;
  DELETE FROM schema_migrations WHERE name >= '0061'; PRAGMA user_version = 60;
`;

/** The guard triggers of 0062, for a spec that plays a process which drops them before it damages heads. */
export const HEAD_GUARDS = ['streams_legal_move', 'streams_no_delete', 'runs_legal_move', 'runs_no_delete', 'step_runs_legal_move', 'step_runs_no_delete'] as const;
