-- R14.2 retention on PostgreSQL, the twin of SQLite's 0094: an operator compacts a finished Run
-- into one record that binds, by digest, everything removed; the identities stay so they refuse
-- reuse and an exact replay answers START_COMPACTED.
--
-- The guard: only ql3.compact_run (SECURITY DEFINER, owned by ql3_owner) writes the two tables,
-- and only ql3_retention may execute it; ql3_runtime keeps no DELETE (pg-0038) and gets neither
-- EXECUTE nor INSERT here. The function checks the rule itself (every StepRun terminal, every
-- attempt decided, no live driver claim, the last event before the cut-off, the record's digest
-- and counts), writes the record and the identities, then deletes the Run's rows, in the
-- caller's one transaction. The append-only triggers still refuse every DELETE, except of a row
-- whose Run (or start) a compaction record already binds, which only that function writes.
DO $roles$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'ql3_retention') THEN
    BEGIN
      CREATE ROLE ql3_retention NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL; -- another database of this cluster created it first
    END;
  END IF;
END
$roles$;
GRANT USAGE ON SCHEMA ql3 TO ql3_retention;

SET LOCAL ROLE ql3_owner;

CREATE TABLE ql3.run_compactions (
  run_id            text PRIMARY KEY,
  record_json       text NOT NULL CHECK (record_json::jsonb IS NOT NULL),
  compaction_digest text NOT NULL CHECK (compaction_digest ~ '^sha256:[0-9a-f]{64}$')
);

CREATE TABLE ql3.compacted_identities (
  identity       text NOT NULL CHECK (identity IN ('startId', 'mutationId', 'runEventId', 'traceId', 'auditEventId', 'auditReceiptId', 'attempt')),
  value          text NOT NULL,
  start_id       text NOT NULL,
  run_id         text NOT NULL REFERENCES ql3.run_compactions (run_id),
  command_digest text NOT NULL,
  barrier_digest text NOT NULL,
  PRIMARY KEY (identity, value)
);
CREATE INDEX compacted_identities_by_run ON ql3.compacted_identities (run_id);

CREATE TRIGGER run_compactions_immutable BEFORE UPDATE OR DELETE ON ql3.run_compactions
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('compaction records are immutable');
CREATE TRIGGER run_compactions_no_truncate BEFORE TRUNCATE ON ql3.run_compactions
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('compaction records are immutable');
CREATE TRIGGER compacted_identities_immutable BEFORE UPDATE OR DELETE ON ql3.compacted_identities
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('compacted identities are immutable');
CREATE TRIGGER compacted_identities_no_truncate BEFORE TRUNCATE ON ql3.compacted_identities
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('compacted identities are immutable');
REVOKE ALL ON ql3.run_compactions, ql3.compacted_identities FROM PUBLIC;
GRANT SELECT ON ql3.run_compactions, ql3.compacted_identities TO ql3_runtime, ql3_retention;

-- Whether a compaction record binds the row a delete trigger fires on: by its stream, its Run or its start.
CREATE FUNCTION ql3.compacted_row(r jsonb) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT CASE
    WHEN r ? 'stream_id' THEN EXISTS (SELECT 1 FROM ql3.run_compactions c WHERE 'run-' || c.run_id = r->>'stream_id')
    WHEN r ? 'run_id' THEN EXISTS (SELECT 1 FROM ql3.run_compactions c WHERE c.run_id = r->>'run_id')
    WHEN r ? 'start_id' THEN EXISTS (SELECT 1 FROM ql3.compacted_identities i WHERE i.identity = 'startId' AND i.value = r->>'start_id')
    ELSE false END
$fn$;

-- The shared append-only guard: a DELETE goes only for a row its compaction record binds.
CREATE OR REPLACE FUNCTION ql3.refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
  IF TG_OP = 'DELETE' AND TG_TABLE_NAME NOT IN ('run_compactions', 'compacted_identities') AND ql3.compacted_row(to_jsonb(OLD)) THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION '% on %.% refused: % (R6.4)', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV[0]
    USING ERRCODE = 'integrity_constraint_violation';
END
$fn$;

CREATE OR REPLACE FUNCTION ql3.invocation_plans_shred_only() RETURNS trigger
LANGUAGE plpgsql SET search_path TO 'pg_catalog', 'pg_temp' AS $fn$
BEGIN
  IF TG_OP = 'DELETE' AND ql3.compacted_row(to_jsonb(OLD)) THEN
    RETURN OLD;
  END IF;
  IF TG_OP <> 'UPDATE' THEN
    RAISE EXCEPTION 'an invocation plan is shredded, never deleted';
  END IF;
  IF NOT (OLD.ciphertext IS NOT NULL AND NEW.ciphertext IS NULL AND NEW.key_id IS NULL AND NEW.nonce IS NULL
          AND NEW.start_id = OLD.start_id AND NEW.plan_digest = OLD.plan_digest AND NEW.preview_json = OLD.preview_json) THEN
    RAISE EXCEPTION 'an invocation plan can only be shredded';
  END IF;
  RETURN NEW;
END
$fn$;

CREATE OR REPLACE FUNCTION ql3.resolution_notes_purge_only() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
  IF TG_OP = 'DELETE' THEN
    IF ql3.compacted_row(to_jsonb(OLD)) THEN
      RETURN OLD;
    END IF;
    RAISE EXCEPTION 'a resolution note is purged, never deleted: its digest stays bound';
  END IF;
  IF NOT (OLD.note_text IS NOT NULL AND NEW.note_text IS NULL AND NEW.purged_at_ms IS NOT NULL
          AND NEW.start_id = OLD.start_id AND NEW.note_digest = OLD.note_digest) THEN
    RAISE EXCEPTION 'a resolution note can only be purged';
  END IF;
  RETURN NEW;
END $fn$;

-- a compacted Run is never written again: its stream cannot be made anew
CREATE FUNCTION ql3.stream_not_compacted() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  IF EXISTS (SELECT 1 FROM ql3.run_compactions c WHERE 'run-' || c.run_id = NEW.stream_id) THEN
    RAISE EXCEPTION 'illegal history refused: a compacted Run is never written again (R14.2)' USING ERRCODE = 'Q3C01';
  END IF;
  RETURN NEW;
END
$fn$;
CREATE TRIGGER streams_not_compacted BEFORE INSERT ON ql3.streams FOR EACH ROW EXECUTE FUNCTION ql3.stream_not_compacted();

-- a compacted identity is never bound again: raised as the replay index's own unique violation,
-- so the start path answers it as any taken identity (a conflict naming it)
CREATE FUNCTION ql3.identity_not_compacted() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  IF EXISTS (SELECT 1 FROM ql3.compacted_identities c WHERE c.identity = NEW.identity AND c.value = NEW.value) THEN
    RAISE EXCEPTION 'duplicate key value violates unique constraint "start_replay_identities_key"'
      USING ERRCODE = 'unique_violation', CONSTRAINT = 'start_replay_identities_key', TABLE = 'start_replay_identities', SCHEMA = 'ql3',
            DETAIL = format('Key (identity, value)=(%s, %s) already exists (compacted, R14.2).', NEW.identity, NEW.value);
  END IF;
  RETURN NEW;
END
$fn$;
CREATE TRIGGER start_replay_identities_not_compacted BEFORE INSERT ON ql3.start_replay_identities FOR EACH ROW EXECUTE FUNCTION ql3.identity_not_compacted();

-- Compacts one Run, or raises: the record is the canonical JSON the caller computed (its digest
-- is checked here), the identities are copied from the live index, then every row goes.
CREATE FUNCTION ql3.compact_run(p_record_json text, p_digest text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  r jsonb := p_record_json::jsonb;
  v_run text := r->>'runId';
  v_stream text := 'run-' || (r->>'runId');
  v_now bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
  v_starts text[];
  v_last bigint;
BEGIN
  PERFORM 1 FROM ql3.runs WHERE run_id = v_run FOR UPDATE;
  IF NOT FOUND THEN RAISE EXCEPTION 'compaction refused: no such Run' USING ERRCODE = 'check_violation'; END IF;
  IF p_digest IS DISTINCT FROM 'sha256:' || encode(sha256(convert_to('qinglong/run-compaction@v1', 'UTF8') || '\x00'::bytea || convert_to(p_record_json, 'UTF8')), 'hex') THEN
    RAISE EXCEPTION 'compaction refused: the record does not match its digest' USING ERRCODE = 'check_violation';
  END IF;
  IF EXISTS (SELECT 1 FROM ql3.step_runs WHERE run_id = v_run AND status NOT IN ('completed', 'failed')) THEN
    RAISE EXCEPTION 'compaction refused: step_run_not_terminal' USING ERRCODE = 'check_violation';
  END IF;
  SELECT coalesce(array_agg(start_id), '{}') INTO v_starts FROM ql3.tool_execution_start_barriers WHERE run_id = v_run;
  IF EXISTS (SELECT 1 FROM unnest(v_starts) s WHERE NOT EXISTS (SELECT 1 FROM ql3.start_outcomes o WHERE o.start_id = s)) THEN
    RAISE EXCEPTION 'compaction refused: attempt_in_doubt' USING ERRCODE = 'check_violation';
  END IF;
  IF EXISTS (SELECT 1 FROM ql3.adapter_driver_claims c WHERE c.start_id = ANY (v_starts) AND c.kind = 'claim' AND c.lease_until_ms > v_now
             AND c.generation = (SELECT max(m.generation) FROM ql3.adapter_driver_claims m WHERE m.start_id = c.start_id AND m.kind = 'claim')
             AND NOT EXISTS (SELECT 1 FROM ql3.adapter_driver_claims x WHERE x.start_id = c.start_id AND x.generation = c.generation AND x.kind = 'release')) THEN
    RAISE EXCEPTION 'compaction refused: live_driver_claim' USING ERRCODE = 'check_violation';
  END IF;
  SELECT max(committed_at_ms) INTO v_last FROM ql3.events WHERE stream_id = v_stream;
  IF NOT (v_last < (r->>'beforeMs')::bigint AND (r->>'finishedAtMs')::bigint = v_last) THEN
    RAISE EXCEPTION 'compaction refused: finished_after_cutoff' USING ERRCODE = 'check_violation';
  END IF;
  IF (r->>'streamVersion')::bigint IS DISTINCT FROM (SELECT version FROM ql3.streams WHERE stream_id = v_stream)
     OR jsonb_array_length(r->'barriers') <> cardinality(v_starts)
     OR jsonb_array_length(r->'identities') <> (SELECT count(*) FROM ql3.start_replay_identities WHERE start_id = ANY (v_starts)) THEN
    RAISE EXCEPTION 'compaction refused: the record does not bind the Run as stored' USING ERRCODE = 'check_violation';
  END IF;

  INSERT INTO ql3.run_compactions (run_id, record_json, compaction_digest) VALUES (v_run, p_record_json, p_digest);
  INSERT INTO ql3.compacted_identities (identity, value, start_id, run_id, command_digest, barrier_digest)
    SELECT i.identity, i.value, i.start_id, v_run, b.command_digest, b.barrier_digest
      FROM ql3.start_replay_identities i JOIN ql3.tool_execution_start_barriers b ON b.start_id = i.start_id
     WHERE i.start_id = ANY (v_starts);

  DELETE FROM ql3.start_outcomes WHERE start_id = ANY (v_starts);
  DELETE FROM ql3.adapter_driver_claims WHERE start_id = ANY (v_starts);
  DELETE FROM ql3.start_evidence_macs WHERE start_id = ANY (v_starts);
  DELETE FROM ql3.start_replay_identities WHERE start_id = ANY (v_starts);
  DELETE FROM ql3.in_doubt_starts WHERE start_id = ANY (v_starts);
  DELETE FROM ql3.invocation_plans WHERE start_id = ANY (v_starts);
  DELETE FROM ql3.resolution_notes WHERE start_id = ANY (v_starts);
  DELETE FROM ql3.tool_execution_start_barriers WHERE start_id = ANY (v_starts);
  DELETE FROM ql3.audit_receipts WHERE start_id = ANY (v_starts);
  DELETE FROM ql3.trace_anchors WHERE start_id = ANY (v_starts);
  DELETE FROM ql3.security_audit_events WHERE start_id = ANY (v_starts);
  DELETE FROM ql3.step_run_mutations WHERE start_id = ANY (v_starts);
  DELETE FROM ql3.step_runs WHERE run_id = v_run;
  DELETE FROM ql3.runs WHERE run_id = v_run;
  DELETE FROM ql3.run_event_macs WHERE stream_id = v_stream;
  DELETE FROM ql3.events WHERE stream_id = v_stream;
  DELETE FROM ql3.streams WHERE stream_id = v_stream;
END
$fn$;
REVOKE ALL ON FUNCTION ql3.compact_run(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql3.compact_run(text, text) TO ql3_retention;
