import { PG_ADD_JSON_COPIES, PG_FILL_JSON_COPIES, PG_RESTORE_REPEATED_KEYS } from '../../testkit/legacyStartTables';
import { loadMigrations } from '../../infrastructure/migrations';

/** A function as the migration that created it defined it, to put back what a later one replaced. */
const functionAsCreatedBy = (migration: string, signature: string, create = 'CREATE FUNCTION', end = '$fn$;'): string => {
  const sql = loadMigrations('postgres').find((m) => m.name.startsWith(migration))?.sql ?? '';
  const from = sql.indexOf(`${create} ${signature}`);
  const to = sql.indexOf(end, from);
  if (from < 0 || to < 0) throw new Error(`${migration} does not create ${signature}`);
  return `${sql.slice(from, to + end.length).replace(create, 'CREATE OR REPLACE FUNCTION')}`;
};

// What pg-0052 (the last attempt alone) and pg-0053 (the heads moved once per statement) change,
// taken back: the functions they replaced as pg-0036, pg-0037 and pg-0045 made them; and what
// pg-0056 adds: the StepRun version index and the trigger that reads it; and pg-0058's driver
// claim rules; and pg-0059's replay index written by the barrier's insert; and pg-0060's fact
// rows, each beside its event; and pg-0061's start, which follows the log; and pg-0062's claim
// lease bound; and pg-0063's free positions of the seal origin and the runtime's column-wise
// INSERT on events; and pg-0064's in-doubt index with its triggers and the running StepRuns'
// index; and pg-0065's synchronous standby guard; and pg-0066's invocation plans; and pg-0067's
// compaction: its tables, its function, its stream guard and the delete guards it widened.
export const UNDO_GATE_AND_HEADS = `
  DROP FUNCTION ql3.compact_run(text, text);
  DROP TRIGGER streams_not_compacted ON ql3.streams;
  DROP FUNCTION ql3.stream_not_compacted();
  DROP TRIGGER start_replay_identities_not_compacted ON ql3.start_replay_identities;
  DROP FUNCTION ql3.identity_not_compacted();
  SET ROLE ql3_owner;
  ${functionAsCreatedBy('pg-0001', 'ql3.refuse_change()')}
  ${functionAsCreatedBy('pg-0033', 'ql3.resolution_notes_purge_only()', 'CREATE OR REPLACE FUNCTION', 'END $$;')}
  RESET ROLE;
  DROP FUNCTION ql3.compacted_row(jsonb);
  DROP TABLE ql3.compacted_identities, ql3.run_compactions;
  REVOKE USAGE ON SCHEMA ql3 FROM ql3_retention;
  DROP TABLE ql3.invocation_plans;
  DROP FUNCTION ql3.require_sync_standby();
  DROP FUNCTION ql3.invocation_plans_shred_only();
  DROP FUNCTION ql3.shred_invocation_plan(text);
  DROP TABLE ql3.in_doubt_starts;
  DROP INDEX ql3.step_runs_running;
  DROP TRIGGER in_doubt_starts_from_barrier ON ql3.tool_execution_start_barriers;
  DROP TRIGGER in_doubt_starts_leave_on_outcome ON ql3.start_outcomes;
  DROP FUNCTION ql3.in_doubt_from_barrier();
  DROP FUNCTION ql3.in_doubt_leave_on_outcome();
  ALTER TABLE ql3.run_event_seal_origins DROP COLUMN legacy_gaps;
  REVOKE INSERT (stream_id, stream_position, event_id, event_type, data_json, committed_at_ms) ON ql3.events FROM ql3_runtime;
  GRANT INSERT ON ql3.events TO ql3_runtime;
  DROP TRIGGER events_start_follows_log ON ql3.events;
  DROP FUNCTION ql3.start_follows_log();
  DROP TRIGGER security_audit_events_beside_their_event ON ql3.security_audit_events;
  DROP TRIGGER trace_anchors_beside_their_event ON ql3.trace_anchors;
  DROP TRIGGER audit_receipts_beside_their_event ON ql3.audit_receipts;
  DROP TRIGGER step_run_mutations_beside_their_event ON ql3.step_run_mutations;
  DROP FUNCTION ql3.fact_beside_its_event();
  DROP TRIGGER tool_execution_start_barriers_index ON ql3.tool_execution_start_barriers;
  DROP FUNCTION ql3.index_start_barrier();
  GRANT INSERT ON ql3.start_replay_identities TO ql3_runtime;
  DROP TRIGGER adapter_driver_claims_follow_rules ON ql3.adapter_driver_claims;
  DROP FUNCTION ql3.driver_claim_follows_rules();
  DROP TRIGGER adapter_driver_claims_lease_bound ON ql3.adapter_driver_claims;
  DROP FUNCTION ql3.driver_claim_lease_bound();
  DROP TRIGGER events_step_run_follows_log ON ql3.events;
  DROP FUNCTION ql3.step_run_event_follows_log();
  DROP INDEX ql3.events_step_run_version_key;
  DROP TRIGGER events_move_run_heads ON ql3.events;
  DROP FUNCTION ql3.move_run_heads();
  SET ROLE ql3_owner;
  ${functionAsCreatedBy('pg-0036', 'ql3.append_run_event()')}
  ${functionAsCreatedBy('pg-0037', 'ql3.take_run_turn(p_run_id text)')}
  ${functionAsCreatedBy('pg-0045', 'ql3.take_start_turn(p_run_id text, p_expected_version bigint)')}
  RESET ROLE;
  DROP FUNCTION ql3.take_run_turn(text, boolean), ql3.take_start_turn(text, bigint, boolean), ql3.take_start_gate(boolean), ql3.wait_start_gate_alone();
  DROP TABLE ql3.start_gate;
  DELETE FROM ql3.schema_migrations WHERE name >= 'pg-0052';
`;

// What pg-0050 changes, taken back (testkit/legacyStartTables.ts): the JSON copies, filled again
// from the events (the one place pg-0050 keeps them), and the repeated unique constraints. Run as
// a superuser (replica role skips the append-only triggers while the copies are written back).
// What pg-0051 changes, taken back: the replay index's command digest (filled again from the
// barrier each row names) and its start_id index.
export const UNDO_COMPACT_INDEX = `${UNDO_GATE_AND_HEADS}
  ALTER TABLE ql3.start_replay_identities ADD COLUMN command_digest TEXT;
  SET session_replication_role = replica;
  UPDATE ql3.start_replay_identities i SET command_digest = b.command_digest FROM ql3.tool_execution_start_barriers b WHERE b.start_id = i.start_id;
  SET session_replication_role = DEFAULT;
  ALTER TABLE ql3.start_replay_identities ALTER COLUMN command_digest SET NOT NULL;
  CREATE INDEX start_replay_identities_start ON ql3.start_replay_identities (start_id);
  DELETE FROM ql3.schema_migrations WHERE name >= 'pg-0051';
`;

export const UNDO_STORED_ONCE = `${UNDO_COMPACT_INDEX}
  ${PG_ADD_JSON_COPIES}
  SET session_replication_role = replica;
  ${PG_FILL_JSON_COPIES}
  SET session_replication_role = DEFAULT;
  ${PG_RESTORE_REPEATED_KEYS}
  DELETE FROM ql3.schema_migrations WHERE name >= 'pg-0050';
`;

// What pg-0035 .. pg-0039 (and pg-0042, the row digests, and pg-0045, the start's turn function) add, taken away again: a spec that rolls a store back to before them
// (as written by the code before the chain and the event trigger) and lets the migrator
// upgrade it. Their schema_migrations rows are deleted by the caller.
export const UNDO_HISTORY_MIGRATIONS = `${UNDO_STORED_ONCE}
  DROP TRIGGER events_append_run_event ON ql3.events;
  DROP TRIGGER events_whole_start ON ql3.events;
  DROP FUNCTION ql3.append_run_event(), ql3.require_whole_start(), ql3.refuse_history(text), ql3.step_run_json(jsonb, boolean),
    ql3.tagged_digest(text, text), ql3.take_run_turn(text), ql3.await_run_turn(text, integer), ql3.take_start_turn(text, bigint),
    ql3.event_chain_digest(text, text, bigint, text, text, text, bigint);
  DROP FUNCTION ql3.purge_resolution_note(text, text);
  ALTER TABLE ql3.events DROP COLUMN chain_digest;
  GRANT INSERT, UPDATE ON ql3.streams, ql3.runs, ql3.step_runs TO ql3_runtime;
  GRANT UPDATE (note_text, purged_at_ms) ON ql3.resolution_notes TO ql3_runtime;
  DROP TRIGGER schema_migrations_digest ON ql3.schema_migrations;
  DROP FUNCTION ql3.schema_migrations_digest(), ql3.fields_digest(text, text[]);
  ALTER TABLE ql3.schema_migrations DROP COLUMN ledger_digest;
  ALTER TABLE ql3.adapter_driver_claims DROP COLUMN claim_digest;
  ALTER TABLE ql3.resolution_notes DROP COLUMN purge_digest;
  DELETE FROM ql3.schema_migrations WHERE name >= 'pg-0035';
`;
