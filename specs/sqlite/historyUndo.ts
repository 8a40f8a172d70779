// What 0061 .. 0063 (and 0072, 0073, which build on them) add, taken away again: a spec that rolls a store back to before them (as
// written by the code before the chain and the history triggers) and lets the migrator upgrade
// it. Their schema_migrations rows are deleted by the caller.
export const UNDO_HISTORY_MIGRATIONS = `
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
  DELETE FROM schema_migrations WHERE name >= '0061';
`;

/** The guard triggers of 0062, for a spec that plays a process which drops them before it damages heads. */
export const HEAD_GUARDS = ['streams_legal_move', 'streams_no_delete', 'runs_legal_move', 'runs_no_delete', 'step_runs_legal_move', 'step_runs_no_delete'] as const;
