-- The start barrier's schema as the product uses it, on top of the ADR's pg-0001 .. pg-0030.
-- One file, in sections: roles, tables in their final form, the data a pg-0030 store moves
-- forward, indexes, functions, triggers grouped by the table they guard, grants. Every object
-- below is created here once; specs/postgres/schemaFile.int.spec.ts compares it with the catalog.
--
-- The rules it keeps (R5.2, R9.1, R14.2): ql3_owner owns everything; the runtime role appends
-- and never rewrites (no UPDATE, DELETE or TRUNCATE anywhere, no INSERT on the heads); the
-- heads, the StepRun state and every read model are written by SECURITY DEFINER triggers from
-- the event log, so each is the image of the log; a compacted Run is removed only through
-- ql3.compact_run, which ql3_retention alone may call.

-- ------------------------------------------------------------------ roles

-- Roles are cluster-wide: another database of the cluster may have made them already.
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

-- requireSynchronousStandby reads pg_stat_replication as ql3_owner, which shows the standbys'
-- states only to members of pg_read_all_stats. A login that may not grant it leaves the guard
-- failing closed (it names the missing grant) until a superuser runs the GRANT once.
DO $stats$
BEGIN
  IF NOT pg_catalog.pg_has_role('ql3_owner', 'pg_read_all_stats', 'USAGE') THEN
    GRANT pg_read_all_stats TO ql3_owner;
  END IF;
EXCEPTION WHEN OTHERS THEN
  RAISE NOTICE 'ql3_owner is not a member of pg_read_all_stats (%): requireSynchronousStandby refuses every start until a superuser runs GRANT pg_read_all_stats TO ql3_owner', SQLERRM;
END
$stats$;

SET LOCAL ROLE ql3_owner;

-- ------------------------------------------------------------------ tables

-- The ADR's tables. Each start record's canonical JSON is stored once, in its event (chained,
-- and fetched by every verified read): the fact tables keep their mirror columns and keys, not
-- copies of the JSON. Each R4.1 identity is held once, by the unique key of the fact that
-- carries it, not by a separate replay index. A copy (and the index) is dropped only once
-- proven equal to its source, so a store where one differs is refused rather than lose the
-- evidence of the difference.
DO $copies$
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
    UNION ALL
    SELECT 'replay identity ' || i.identity || ' ' || i.value FROM ql3.start_replay_identities i
      LEFT JOIN ql3.tool_execution_start_barriers b ON b.start_id = i.start_id
     WHERE b.command_digest IS DISTINCT FROM i.command_digest
        OR i.value IS DISTINCT FROM CASE i.identity WHEN 'startId' THEN b.start_id WHEN 'mutationId' THEN b.mutation_id
             WHEN 'runEventId' THEN b.run_event_id WHEN 'traceId' THEN b.trace_id WHEN 'auditEventId' THEN b.audit_event_id
             WHEN 'auditReceiptId' THEN b.audit_receipt_id
             WHEN 'attempt' THEN '[' || to_json(b.run_id)::text || ',' || to_json(b.step_run_id)::text || ',' || b.started_step_run_version::text || ']' END
  ) d LIMIT 1;
  IF differs IS NOT NULL THEN
    RAISE EXCEPTION 'a_stored_copy_differs_from_its_source: %', differs;
  END IF;
END
$copies$;

-- Each event binds the chain digest of the one before it in its stream (R9.2); filled below.
ALTER TABLE ql3.events ADD COLUMN chain_digest TEXT;
-- lz4 where the server has it (PostgreSQL 14+ built with it); pglz, the default, where not.
DO $lz4$
BEGIN
  EXECUTE 'ALTER TABLE ql3.events ALTER COLUMN data_json SET COMPRESSION lz4';
EXCEPTION WHEN OTHERS THEN
  NULL;
END
$lz4$;

ALTER TABLE ql3.security_audit_events DROP COLUMN event_json;
ALTER TABLE ql3.trace_anchors DROP COLUMN anchor_json;
-- Each identity of R4.1 is enforced once, by its fact's own key: the primary keys, the events'
-- event id and the barrier's attempt key. The barrier's insert checks every fact it names is its
-- own (below), so the unique keys that repeated that on the barrier and the receipt go.
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
  DROP COLUMN barrier_json;
DROP TABLE ql3.start_replay_identities;

-- The heads are updated in place by every append: room on the page keeps those updates HOT.
ALTER TABLE ql3.streams SET (fillfactor = 50);
ALTER TABLE ql3.runs SET (fillfactor = 50);
ALTER TABLE ql3.step_runs SET (fillfactor = 50);

-- Each ledger row binds its name, checksum and time by a digest (R9.2); the trigger below
-- stamps the rows to come.
ALTER TABLE ql3.schema_migrations ADD COLUMN ledger_digest TEXT;

-- The outcome of each decided start, one row per barrier that has one; a barrier without one is
-- in doubt. Projected from the outcome event by the statement that appends it.
CREATE TABLE ql3.start_outcomes (
  start_id         TEXT   NOT NULL PRIMARY KEY REFERENCES ql3.tool_execution_start_barriers (start_id),
  run_id           TEXT   NOT NULL,
  step_run_id      TEXT   NOT NULL,
  outcome          TEXT   NOT NULL CHECK (outcome IN ('completed', 'failed', 'lost')),
  decided_by       TEXT   NOT NULL,
  reason           TEXT   NOT NULL,
  outcome_digest   TEXT,
  step_run_version BIGINT NOT NULL CHECK (step_run_version >= 1),
  event_id         TEXT   NOT NULL REFERENCES ql3.events (event_id),
  stream_position  BIGINT NOT NULL CHECK (stream_position >= 1),
  requested_at_ms  BIGINT NOT NULL,
  committed_at_ms  BIGINT NOT NULL,
  CONSTRAINT start_outcomes_event_id_key UNIQUE (event_id),
  CONSTRAINT start_outcomes_attempt_key UNIQUE (run_id, step_run_id, step_run_version),
  FOREIGN KEY (run_id, step_run_id) REFERENCES ql3.step_runs (run_id, step_run_id)
);

-- The starts with no outcome, in listing order: a page of N in-doubt starts is N index entries.
-- The image of the barriers and outcomes, written only by their triggers.
CREATE TABLE ql3.in_doubt_starts (
  start_id        TEXT   NOT NULL PRIMARY KEY REFERENCES ql3.tool_execution_start_barriers (start_id),
  project_id      TEXT   NOT NULL,
  run_id          TEXT   NOT NULL,
  committed_at_ms BIGINT NOT NULL
);

-- An operator's note on a resolved start: bound by its digest, purged (text removed) never deleted.
CREATE TABLE ql3.resolution_notes (
  start_id     TEXT   NOT NULL,
  note_digest  TEXT   NOT NULL CHECK (note_digest ~ '^sha256:[0-9a-f]{64}$'),
  note_text    TEXT,
  purged_at_ms BIGINT,
  purge_digest TEXT,
  PRIMARY KEY (start_id, note_digest),
  CHECK ((note_text IS NULL) = (purged_at_ms IS NOT NULL)),
  CONSTRAINT resolution_notes_purge_digest CHECK ((purge_digest IS NULL) = (purged_at_ms IS NULL))
);

-- Adapter drivers' claims on a start (R11.2): one generation at a time, each claimed and
-- released by its driver, every row bound by a digest of its cells.
CREATE TABLE ql3.adapter_driver_claims (
  start_id       TEXT   NOT NULL REFERENCES ql3.tool_execution_start_barriers (start_id),
  generation     BIGINT NOT NULL CHECK (generation >= 1),
  kind           TEXT   NOT NULL CHECK (kind IN ('claim', 'release')),
  driver_id      TEXT   NOT NULL,
  at_ms          BIGINT NOT NULL,
  lease_until_ms BIGINT NOT NULL,
  claim_digest   TEXT   NOT NULL,
  PRIMARY KEY (start_id, generation, kind),
  CONSTRAINT adapter_driver_claims_digest_shape CHECK (claim_digest LIKE 'sha256:%' AND length(claim_digest) = 71)
);

-- Keyed evidence (R9.4): the MAC of each barrier, and the seals of each Run stream's events
-- from the first position a key covered (the origin row names where keying began).
CREATE TABLE ql3.start_evidence_macs (
  start_id TEXT NOT NULL PRIMARY KEY REFERENCES ql3.tool_execution_start_barriers (start_id),
  key_id   TEXT NOT NULL CHECK (length(key_id) BETWEEN 1 AND 64),
  mac      TEXT NOT NULL CHECK (length(mac) = 64)
);
CREATE TABLE ql3.run_event_macs (
  stream_id     TEXT NOT NULL,
  from_position BIGINT NOT NULL CHECK (from_position >= 1),
  to_position   BIGINT NOT NULL CHECK (to_position >= from_position),
  key_id        TEXT NOT NULL CHECK (length(key_id) BETWEEN 1 AND 64),
  mac           TEXT NOT NULL CHECK (length(mac) = 64),
  PRIMARY KEY (stream_id, from_position)
);
CREATE TABLE ql3.run_event_seal_origins (
  key_id               TEXT NOT NULL PRIMARY KEY CHECK (length(key_id) BETWEEN 1 AND 64),
  from_global_position BIGINT NOT NULL CHECK (from_global_position >= 1),
  from_ms              BIGINT NOT NULL,
  mac                  TEXT NOT NULL CHECK (length(mac) = 64),
  legacy_gaps          TEXT NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(legacy_gaps::jsonb) = 'array')
);

-- A start's sealed invocation plan (R12.2): shredded (key and ciphertext removed), never deleted.
CREATE TABLE ql3.invocation_plans (
  start_id     TEXT  NOT NULL PRIMARY KEY REFERENCES ql3.tool_execution_start_barriers (start_id),
  plan_digest  TEXT  NOT NULL CHECK (plan_digest ~ '^sha256:[0-9a-f]{64}$'),
  key_id       TEXT,
  nonce        BYTEA,
  ciphertext   BYTEA,
  preview_json TEXT  NOT NULL,
  CHECK ((key_id IS NULL) = (ciphertext IS NULL) AND (nonce IS NULL) = (ciphertext IS NULL))
);

-- A write's last attempt runs alone (R9.5): it takes this table's lock exclusively, every other
-- start takes it shared. It holds no rows.
CREATE TABLE ql3.start_gate ();

-- Retention (R14.2): the record a compacted Run leaves, and its starts' identities, which keep
-- refusing reuse and answer an exact replay with START_COMPACTED.
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

-- ------------------------------------------------------------------ indexes

-- verify proves no evidence exists without its StepRun move.
CREATE INDEX step_run_mutations_start ON ql3.step_run_mutations (start_id);
-- A StepRun moves once per version: its events are keyed by (stream, StepRun, version), which is
-- also how the triggers find the event a move follows.
CREATE UNIQUE INDEX events_step_run_version_key ON ql3.events
  (stream_id, (data_json::json ->> 'stepRunId'), ((data_json::json ->> 'stepRunVersion')::bigint))
  WHERE event_type IN ('StepRunCreated', 'StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed');
CREATE INDEX in_doubt_starts_listing ON ql3.in_doubt_starts (committed_at_ms, start_id);
CREATE INDEX in_doubt_starts_project ON ql3.in_doubt_starts (project_id, committed_at_ms, start_id);
CREATE INDEX in_doubt_starts_run ON ql3.in_doubt_starts (run_id, committed_at_ms, start_id);
-- A page that lists its whole scope checks no running StepRun lies beyond it, reading those alone.
CREATE INDEX step_runs_running ON ql3.step_runs (run_id, step_run_id) WHERE status = 'running';
CREATE INDEX compacted_identities_by_run ON ql3.compacted_identities (run_id);

-- ------------------------------------------------------------------ functions: helpers

-- Every refusal of an illegal history carries one SQLSTATE, which the driver maps (R9.1).
CREATE FUNCTION ql3.refuse_history(what text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  RAISE EXCEPTION 'illegal history refused: % (R9.1)', what USING ERRCODE = 'Q3H01';
END
$fn$;

-- The digests the TypeScript side computes too (domain/eventChain.ts): fields joined by NUL,
-- which no field can hold. SQL functions without SET search_path, so they can be inlined.
CREATE FUNCTION ql3.fields_digest(tag text, fields text[]) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  b bytea := convert_to(tag, 'UTF8');
  f text;
BEGIN
  FOREACH f IN ARRAY fields LOOP
    b := b || '\x00'::bytea || convert_to(f, 'UTF8');
  END LOOP;
  RETURN 'sha256:' || encode(sha256(b), 'hex');
END
$fn$;

CREATE FUNCTION ql3.tagged_digest(tag text, body text) RETURNS text
LANGUAGE sql STABLE STRICT AS $fn$
  SELECT 'sha256:' || pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(tag, 'UTF8') || '\x00'::bytea || pg_catalog.convert_to(body, 'UTF8')), 'hex')
$fn$;

CREATE FUNCTION ql3.event_chain_digest(previous text, stream_id text, stream_position bigint, event_id text, event_type text, data_json text, committed_at_ms bigint) RETURNS text
LANGUAGE sql STABLE STRICT AS $fn$
  SELECT 'sha256:' || pg_catalog.encode(pg_catalog.sha256(
    pg_catalog.convert_to('qinglong/run-event-chain@v1', 'UTF8') || '\x00'::bytea || pg_catalog.convert_to(previous, 'UTF8') || '\x00'::bytea
    || pg_catalog.convert_to(stream_id, 'UTF8') || '\x00'::bytea || pg_catalog.convert_to(stream_position::text, 'UTF8') || '\x00'::bytea
    || pg_catalog.convert_to(event_id, 'UTF8') || '\x00'::bytea || pg_catalog.convert_to(event_type, 'UTF8') || '\x00'::bytea
    || pg_catalog.convert_to(data_json, 'UTF8') || '\x00'::bytea || pg_catalog.convert_to(committed_at_ms::text, 'UTF8')), 'hex')
$fn$;

-- A StepRun state as canonical JSON (keys in order), with or without its last start.
CREATE FUNCTION ql3.step_run_json(st jsonb, with_last boolean) RETURNS text
LANGUAGE sql STABLE AS $fn$
  SELECT '{' || pg_catalog.concat_ws(',',
    CASE WHEN st ? 'approval' THEN '"approval":{"approvalDigest":' || pg_catalog.to_json(st #>> '{approval,approvalDigest}')::text
      || ',"approvalRequestId":' || pg_catalog.to_json(st #>> '{approval,approvalRequestId}')::text
      || ',"dispatchId":' || pg_catalog.to_json(st #>> '{approval,dispatchId}')::text || '}' END,
    '"kind":' || pg_catalog.to_json(st ->> 'kind')::text,
    CASE WHEN with_last AND st ? 'lastStartId' THEN '"lastStartId":' || pg_catalog.to_json(st ->> 'lastStartId')::text END,
    '"projectId":' || pg_catalog.to_json(st ->> 'projectId')::text,
    '"runId":' || pg_catalog.to_json(st ->> 'runId')::text,
    '"status":' || pg_catalog.to_json(st ->> 'status')::text,
    '"stepRunId":' || pg_catalog.to_json(st ->> 'stepRunId')::text,
    CASE WHEN st ? 'toolDefinition' THEN '"toolDefinition":{"digest":' || pg_catalog.to_json(st #>> '{toolDefinition,digest}')::text
      || ',"id":' || pg_catalog.to_json(st #>> '{toolDefinition,id}')::text || '}' END,
    '"version":' || (st ->> 'version')) || '}'
$fn$;

-- A row of a Run (or start) that a compaction record binds: the one row the append-only
-- triggers let ql3.compact_run delete.
CREATE FUNCTION ql3.compacted_row(r jsonb) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT CASE
    WHEN r ? 'stream_id' THEN EXISTS (SELECT 1 FROM ql3.run_compactions c WHERE 'run-' || c.run_id = r->>'stream_id')
    WHEN r ? 'run_id' THEN EXISTS (SELECT 1 FROM ql3.run_compactions c WHERE c.run_id = r->>'run_id')
    WHEN r ? 'start_id' THEN EXISTS (SELECT 1 FROM ql3.compacted_identities i WHERE i.identity = 'startId' AND i.value = r->>'start_id')
    ELSE false END
$fn$;

-- The append-only guard of every fact table: UPDATE, DELETE and TRUNCATE refused, except the
-- DELETE of a compacted row.
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

-- ------------------------------------------------------------------ functions: the event log

-- Every append to a Run stream, checked and projected as one (R9.1): the stream opened by its
-- RunCreated, each position right after the one before it, a start's five facts together and in
-- order under their own ids, the StepRun moved only as its lifecycle allows (its head written
-- here, the runtime has no UPDATE), and the chain digest linked to the event before.
CREATE FUNCTION ql3.append_run_event() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  d jsonb := NEW.data_json::jsonb;
  v_run_id text;
  prev_type text;
  prev_text text;
  prev_data jsonb;
  prev_chain text := '';
  next_type text;
  expected_id text;
  v_start text;
  h record;
  st jsonb;
  next_status text;
  next_digest text;
  chain text;
  head bigint;
BEGIN
  IF NEW.stream_id NOT LIKE 'run-%' THEN PERFORM ql3.refuse_history(format('stream %s is not a Run stream', NEW.stream_id)); END IF;
  v_run_id := substr(NEW.stream_id, 5);
  IF NEW.committed_at_ms IS DISTINCT FROM (extract(epoch FROM transaction_timestamp()) * 1000)::bigint THEN
    PERFORM ql3.refuse_history(format('%s@%s: committed_at_ms is not the transaction clock (R3.10)', NEW.stream_id, NEW.stream_position));
  END IF;
  -- the stream: opened by RunCreated at 1, then exactly one position after the head
  IF NEW.stream_position = 1 THEN
    IF NEW.event_type <> 'RunCreated' OR d ->> 'runId' IS DISTINCT FROM v_run_id THEN
      PERFORM ql3.refuse_history(format('%s@1 must be the RunCreated of Run %s', NEW.stream_id, v_run_id));
    END IF;
    INSERT INTO ql3.streams (stream_id, stream_type, version) VALUES (NEW.stream_id, 'run', 1);
    INSERT INTO ql3.runs (run_id, project_id, snapshot_id, snapshot_digest, version)
      VALUES (v_run_id, d ->> 'projectId', d ->> 'snapshotId', d ->> 'snapshotDigest', 1);
  ELSE
    -- The event before and the stream head, in one statement.
    SELECT e.event_type, e.chain_digest, CASE WHEN e.event_type IN ('SecurityAuditEventRecorded', 'TraceAnchorRecorded', 'AuditReceiptIssued', 'StepRunStarted')
             THEN e.data_json END,
           (SELECT s.version FROM ql3.streams s WHERE s.stream_id = NEW.stream_id)
      INTO prev_type, prev_chain, prev_text, head
      FROM ql3.events e WHERE e.stream_id = NEW.stream_id AND e.stream_position = NEW.stream_position - 1;
    IF NOT FOUND THEN
      PERFORM ql3.refuse_history(format('%s@%s leaves a gap: there is no event at %s', NEW.stream_id, NEW.stream_position, NEW.stream_position - 1));
    END IF;
    IF NEW.event_type = 'RunCreated' THEN PERFORM ql3.refuse_history(format('%s@%s: a Run is created once', NEW.stream_id, NEW.stream_position)); END IF;
    -- The heads move once per statement (ql3.move_run_heads), so within one they stay where it
    -- found them: each event must lie past the head, and follow an event that exists.
    IF head IS NULL OR head >= NEW.stream_position THEN
      PERFORM ql3.refuse_history(format('%s@%s: the stream head is not at %s', NEW.stream_id, NEW.stream_position, NEW.stream_position - 1));
    END IF;
  END IF;
  -- the five facts of a start: together, in order, one startId, each under its own event id
  v_start := coalesce(d ->> 'startId', d #>> '{barrier,startId}');
  next_type := CASE prev_type WHEN 'SecurityAuditEventRecorded' THEN 'TraceAnchorRecorded' WHEN 'TraceAnchorRecorded' THEN 'AuditReceiptIssued'
    WHEN 'AuditReceiptIssued' THEN 'StepRunStarted' WHEN 'StepRunStarted' THEN 'ToolExecutionStartBarrierCommitted' END;
  IF next_type IS NOT NULL THEN
    -- The barrier compares eleven fields with its StepRunStarted, so that one is parsed as jsonb;
    -- the other facts read only the startId of the fact before them, which json reads cheaper.
    IF NEW.event_type = 'ToolExecutionStartBarrierCommitted' THEN prev_data := prev_text::jsonb; END IF;
    IF NEW.event_type <> next_type
       OR v_start IS DISTINCT FROM (CASE WHEN prev_data IS NULL THEN prev_text::json ->> 'startId' ELSE prev_data ->> 'startId' END) THEN
      PERFORM ql3.refuse_history(format('%s@%s: %s of start %s must follow as %s', NEW.stream_id, NEW.stream_position, NEW.event_type, v_start, next_type));
    END IF;
  ELSIF NEW.event_type IN ('TraceAnchorRecorded', 'AuditReceiptIssued', 'StepRunStarted', 'ToolExecutionStartBarrierCommitted') THEN
    PERFORM ql3.refuse_history(format('%s@%s: %s without the start facts before it', NEW.stream_id, NEW.stream_position, NEW.event_type));
  END IF;
  expected_id := CASE NEW.event_type
      WHEN 'SecurityAuditEventRecorded' THEN 'audit:' || (d ->> 'auditEventId')
      WHEN 'TraceAnchorRecorded' THEN 'trace:' || (d ->> 'traceId')
      WHEN 'AuditReceiptIssued' THEN 'receipt:' || (d ->> 'auditReceiptId')
      WHEN 'StepRunStarted' THEN d ->> 'runEventId'
      WHEN 'ToolExecutionStartBarrierCommitted' THEN 'barrier:' || v_start
      ELSE NEW.event_id END;
  IF NEW.event_id IS DISTINCT FROM expected_id THEN
    PERFORM ql3.refuse_history(format('%s@%s: event id %s is not the id its %s names', NEW.stream_id, NEW.stream_position, NEW.event_id, NEW.event_type));
  END IF;
  IF NEW.event_type = 'ToolExecutionStartBarrierCommitted' AND (
       d #>> '{barrier,runId}' IS DISTINCT FROM prev_data ->> 'runId'
    OR d #>> '{barrier,stepRunId}' IS DISTINCT FROM prev_data ->> 'stepRunId'
    OR d #>> '{barrier,attempt,fromStatus}' IS DISTINCT FROM prev_data ->> 'fromStatus'
    OR d #> '{barrier,attempt,fromStepRunVersion}' IS DISTINCT FROM prev_data -> 'fromStepRunVersion'
    OR d #>> '{barrier,attempt,fromStepRunDigest}' IS DISTINCT FROM prev_data ->> 'fromStepRunDigest'
    OR d #> '{barrier,attempt,startedStepRunVersion}' IS DISTINCT FROM prev_data -> 'stepRunVersion'
    OR d #>> '{barrier,attempt,startedStepRunDigest}' IS DISTINCT FROM prev_data ->> 'startedStepRunDigest'
    OR d #>> '{barrier,mutation,mutationId}' IS DISTINCT FROM prev_data ->> 'mutationId'
    OR d #>> '{barrier,mutation,mutationDigest}' IS DISTINCT FROM prev_data ->> 'mutationDigest'
    OR d #>> '{barrier,runEvent,runEventId}' IS DISTINCT FROM prev_data ->> 'runEventId'
    OR d #> '{barrier,runEvent,runEventSequence}' IS DISTINCT FROM prev_data -> 'runEventSequence') THEN
    PERFORM ql3.refuse_history(format('%s@%s: barrier of start %s does not match the StepRunStarted before it', NEW.stream_id, NEW.stream_position, v_start));
  END IF;
  -- the StepRun head, moved by the transition the lifecycle allows
  IF NEW.event_type LIKE 'StepRun%' THEN
    IF d ->> 'runId' IS DISTINCT FROM v_run_id THEN
      PERFORM ql3.refuse_history(format('%s@%s names Run %s', NEW.stream_id, NEW.stream_position, d ->> 'runId'));
    END IF;
    SELECT s.status, s.version, s.digest, s.state_json INTO h FROM ql3.step_runs s WHERE s.run_id = v_run_id AND s.step_run_id = d ->> 'stepRunId';
    IF NEW.event_type = 'StepRunCreated' THEN
      IF FOUND THEN PERFORM ql3.refuse_history(format('StepRun %s/%s exists already', v_run_id, d ->> 'stepRunId')); END IF;
      IF (d -> 'stepRunVersion') IS DISTINCT FROM '1'::jsonb OR ((d ->> 'kind') = 'tool') IS DISTINCT FROM (d ? 'toolDefinition') THEN
        PERFORM ql3.refuse_history(format('StepRun %s/%s is created at version 1, with a tool definition exactly when it is a tool', v_run_id, d ->> 'stepRunId'));
      END IF;
      st := jsonb_build_object('runId', v_run_id, 'stepRunId', d ->> 'stepRunId', 'kind', d ->> 'kind', 'status', 'created', 'version', 1,
        'projectId', (SELECT r.project_id FROM ql3.runs r WHERE r.run_id = v_run_id));
      IF d ? 'toolDefinition' THEN st := st || jsonb_build_object('toolDefinition', d -> 'toolDefinition'); END IF;
    ELSE
      IF NOT FOUND THEN PERFORM ql3.refuse_history(format('StepRun %s/%s does not exist', v_run_id, d ->> 'stepRunId')); END IF;
      next_status := CASE NEW.event_type WHEN 'StepRunReady' THEN 'ready' WHEN 'StepRunAwaitingApproval' THEN 'waiting_approval'
        WHEN 'StepRunStarted' THEN 'running' WHEN 'StepRunLost' THEN 'lost' WHEN 'StepRunCompleted' THEN 'completed' WHEN 'StepRunFailed' THEN 'failed' END;
      IF next_status IS NULL OR NOT h.status = ANY (CASE NEW.event_type
          WHEN 'StepRunReady' THEN ARRAY['created', 'lost'] WHEN 'StepRunAwaitingApproval' THEN ARRAY['created', 'lost']
          WHEN 'StepRunStarted' THEN ARRAY['ready', 'waiting_approval'] ELSE ARRAY['running'] END) THEN
        PERFORM ql3.refuse_history(format('StepRun %s/%s cannot move from %s by %s', v_run_id, d ->> 'stepRunId', h.status, NEW.event_type));
      END IF;
      IF (d -> 'stepRunVersion') IS DISTINCT FROM to_jsonb(h.version + 1) THEN
        PERFORM ql3.refuse_history(format('StepRun %s/%s is at version %s; %s names %s', v_run_id, d ->> 'stepRunId', h.version, NEW.event_type, d -> 'stepRunVersion'));
      END IF;
      st := h.state_json::jsonb || jsonb_build_object('status', next_status, 'version', h.version + 1);
      IF NEW.event_type = 'StepRunReady' THEN
        st := st - 'approval';
      ELSIF NEW.event_type = 'StepRunAwaitingApproval' THEN
        st := st || jsonb_build_object('approval', d -> 'approval');
      ELSIF NEW.event_type = 'StepRunStarted' THEN
        IF d ->> 'fromStatus' IS DISTINCT FROM h.status OR d -> 'fromStepRunVersion' IS DISTINCT FROM to_jsonb(h.version)
           OR d ->> 'fromStepRunDigest' IS DISTINCT FROM h.digest OR (d -> 'approval') IS DISTINCT FROM (st -> 'approval')
           OR d -> 'runEventSequence' IS DISTINCT FROM to_jsonb(NEW.stream_position) THEN
          PERFORM ql3.refuse_history(format('start %s does not start from the head of StepRun %s/%s', v_start, v_run_id, d ->> 'stepRunId'));
        END IF;
        st := st || jsonb_build_object('lastStartId', v_start);
      ELSIF d ->> 'startId' IS DISTINCT FROM st ->> 'lastStartId' THEN
        PERFORM ql3.refuse_history(format('%s names start %s, but StepRun %s/%s runs %s', NEW.event_type, d ->> 'startId', v_run_id, d ->> 'stepRunId', st ->> 'lastStartId'));
      END IF;
    END IF;
    next_digest := ql3.tagged_digest('qinglong/step-run@v1', ql3.step_run_json(st, false));
    IF NEW.event_type = 'StepRunStarted' AND next_digest IS DISTINCT FROM d ->> 'startedStepRunDigest' THEN
      PERFORM ql3.refuse_history(format('start %s: the started StepRun digest is not the digest of the state it makes', v_start));
    END IF;
    IF NEW.event_type = 'StepRunCreated' THEN
      INSERT INTO ql3.step_runs (run_id, step_run_id, project_id, kind, status, version, digest, state_json)
        VALUES (v_run_id, st ->> 'stepRunId', st ->> 'projectId', st ->> 'kind', 'created', 1, next_digest, ql3.step_run_json(st, true));
    ELSE
      UPDATE ql3.step_runs SET status = next_status, version = h.version + 1, digest = next_digest, state_json = ql3.step_run_json(st, true)
       WHERE run_id = v_run_id AND step_run_id = d ->> 'stepRunId' AND version = h.version;
      IF NOT FOUND THEN PERFORM ql3.refuse_history(format('StepRun %s/%s moved under this event', v_run_id, d ->> 'stepRunId')); END IF;
    END IF;
  END IF;
  chain := ql3.event_chain_digest(prev_chain, NEW.stream_id, NEW.stream_position, NEW.event_id, NEW.event_type, NEW.data_json, NEW.committed_at_ms);
  IF NEW.chain_digest IS NOT NULL AND NEW.chain_digest IS DISTINCT FROM chain THEN
    PERFORM ql3.refuse_history(format('%s@%s: chain digest does not link to the event before it', NEW.stream_id, NEW.stream_position));
  END IF;
  NEW.chain_digest := chain;
  RETURN NEW;
END
$fn$;

-- The stream and Run heads move once per statement, to the last position it appended.
CREATE FUNCTION ql3.move_run_heads() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  r record;
  from_version bigint;
BEGIN
  FOR r IN SELECT e.stream_id, min(e.stream_position) AS first, max(e.stream_position) AS last, count(*) AS n
             FROM new_events e GROUP BY e.stream_id LOOP
    IF r.n <> r.last - r.first + 1 THEN
      PERFORM ql3.refuse_history(format('%s: positions %s .. %s appended as %s events', r.stream_id, r.first, r.last, r.n));
    END IF;
    -- a stream opened by this statement: the event trigger made both heads at 1
    from_version := greatest(r.first - 1, 1);
    CONTINUE WHEN r.last = from_version;
    UPDATE ql3.streams SET version = r.last WHERE stream_id = r.stream_id AND version = from_version;
    IF NOT FOUND THEN PERFORM ql3.refuse_history(format('%s@%s: the stream head is not at %s', r.stream_id, r.first, from_version)); END IF;
    UPDATE ql3.runs SET version = r.last WHERE run_id = substr(r.stream_id, 5) AND version = from_version;
    IF NOT FOUND THEN PERFORM ql3.refuse_history(format('Run %s: its head is not at %s', substr(r.stream_id, 5), from_version)); END IF;
  END LOOP;
  RETURN NULL;
END
$fn$;

-- A start's facts end with its StepRun move and barrier, in the same statement.
CREATE FUNCTION ql3.require_whole_start() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM ql3.streams s WHERE s.stream_id = NEW.stream_id AND s.version >= NEW.stream_position + 4) THEN
    PERFORM ql3.refuse_history(format('start %s: its facts end before its StepRun move and barrier', NEW.data_json::jsonb ->> 'startId'));
  END IF;
  RETURN NULL;
END
$fn$;

-- A start authorises only what its Run's log made: Project, snapshot, tool definition, approval.
CREATE FUNCTION ql3.start_follows_log() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  b jsonb := NEW.data_json::jsonb -> 'barrier';
BEGIN
  IF NOT EXISTS (
       SELECT 1 FROM ql3.events r
        WHERE r.stream_id = NEW.stream_id AND r.stream_position = 1 AND r.event_type = 'RunCreated'
          AND r.data_json::jsonb ->> 'projectId' IS NOT DISTINCT FROM b ->> 'projectId'
          AND r.data_json::jsonb ->> 'snapshotId' IS NOT DISTINCT FROM b ->> 'snapshotId'
          AND r.data_json::jsonb ->> 'snapshotDigest' IS NOT DISTINCT FROM b ->> 'snapshotDigest')
     OR NOT EXISTS (
       SELECT 1 FROM ql3.events c
        WHERE c.stream_id = NEW.stream_id
          AND (c.data_json::json ->> 'stepRunId') = b ->> 'stepRunId'
          AND ((c.data_json::json ->> 'stepRunVersion')::bigint) = 1
          AND c.event_type IN ('StepRunCreated', 'StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed')
          AND c.event_type = 'StepRunCreated'
          AND c.data_json::jsonb ->> 'kind' = 'tool'
          AND c.data_json::jsonb -> 'toolDefinition' IS NOT DISTINCT FROM b -> 'toolDefinition')
     OR NOT EXISTS (
       SELECT 1 FROM ql3.events m
        WHERE m.stream_id = NEW.stream_id
          AND (m.data_json::json ->> 'stepRunId') = b ->> 'stepRunId'
          AND ((m.data_json::json ->> 'stepRunVersion')::bigint) = (b #>> '{attempt,fromStepRunVersion}')::bigint
          AND m.event_type IN ('StepRunCreated', 'StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed')
          AND m.event_type IN ('StepRunReady', 'StepRunAwaitingApproval')
          AND m.data_json::jsonb -> 'approval' IS NOT DISTINCT FROM b -> 'approval') THEN
    PERFORM ql3.refuse_history(format('start %s authorises what the Run''s log made: its Project, snapshot, tool definition and approval', b ->> 'startId'));
  END IF;
  RETURN NEW;
END
$fn$;

-- Each lifecycle event of a StepRun follows the event at the version before it in the log.
CREATE FUNCTION ql3.step_run_event_follows_log() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  d json := NEW.data_json::json;
  prev record;
BEGIN
  SELECT e.event_type, e.data_json::json ->> 'startId' AS start_id INTO prev FROM ql3.events e
   WHERE e.stream_id = NEW.stream_id
     AND e.event_type IN ('StepRunCreated', 'StepRunReady', 'StepRunAwaitingApproval', 'StepRunStarted', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed')
     AND (e.data_json::json ->> 'stepRunId') = (d ->> 'stepRunId')
     AND ((e.data_json::json ->> 'stepRunVersion')::bigint) = (d ->> 'stepRunVersion')::bigint - 1;
  IF NOT FOUND OR NOT (prev.event_type || '>' || NEW.event_type) = ANY (ARRAY[
       'StepRunCreated>StepRunReady', 'StepRunLost>StepRunReady', 'StepRunCreated>StepRunAwaitingApproval', 'StepRunLost>StepRunAwaitingApproval',
       'StepRunStarted>StepRunLost', 'StepRunStarted>StepRunCompleted', 'StepRunStarted>StepRunFailed'])
     OR (NEW.event_type IN ('StepRunLost', 'StepRunCompleted', 'StepRunFailed') AND prev.start_id IS DISTINCT FROM d ->> 'startId') THEN
    PERFORM ql3.refuse_history(format('%s@%s: %s of StepRun %s at version %s does not follow its last event in the log (%s); the StepRun head is not where its log ends',
      NEW.stream_id, NEW.stream_position, NEW.event_type, d ->> 'stepRunId', d ->> 'stepRunVersion', coalesce(prev.event_type, 'none')));
  END IF;
  RETURN NEW;
END
$fn$;

-- The outcome row is the image of its outcome event (no product role may INSERT it).
CREATE FUNCTION ql3.project_start_outcome() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  d jsonb := NEW.data_json::jsonb;
BEGIN
  INSERT INTO ql3.start_outcomes (start_id, run_id, step_run_id, outcome, decided_by, reason, outcome_digest, step_run_version,
      event_id, stream_position, requested_at_ms, committed_at_ms)
  VALUES (d ->> 'startId', d ->> 'runId', d ->> 'stepRunId',
      CASE NEW.event_type WHEN 'StepRunCompleted' THEN 'completed' WHEN 'StepRunFailed' THEN 'failed' ELSE 'lost' END,
      d -> 'resolution' ->> 'decidedBy', d -> 'resolution' ->> 'reason', d ->> 'outcomeDigest', (d ->> 'stepRunVersion')::bigint,
      NEW.event_id, NEW.stream_position, (d ->> 'occurredAtMs')::bigint, NEW.committed_at_ms);
  RETURN NULL;
END
$fn$;

-- A compacted Run is never written again.
CREATE FUNCTION ql3.stream_not_compacted() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  IF EXISTS (SELECT 1 FROM ql3.run_compactions c WHERE 'run-' || c.run_id = NEW.stream_id) THEN
    RAISE EXCEPTION 'illegal history refused: a compacted Run is never written again (R14.2)' USING ERRCODE = 'Q3C01';
  END IF;
  RETURN NEW;
END
$fn$;

-- ------------------------------------------------------------------ functions: facts and read models

-- Each fact row of a start has its own event in the log, naming the same start.
CREATE FUNCTION ql3.fact_beside_its_event() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  found boolean;
BEGIN
  CASE TG_TABLE_NAME
    WHEN 'security_audit_events' THEN
      SELECT true INTO found FROM ql3.events e
       WHERE e.event_id = 'audit:' || NEW.audit_event_id AND e.event_type = 'SecurityAuditEventRecorded'
         AND e.stream_id = 'run-' || NEW.run_id AND e.data_json::json ->> 'startId' IS NOT DISTINCT FROM NEW.start_id;
    WHEN 'trace_anchors' THEN
      SELECT true INTO found FROM ql3.events e
       WHERE e.event_id = 'trace:' || NEW.trace_id AND e.event_type = 'TraceAnchorRecorded'
         AND e.stream_id = 'run-' || NEW.run_id AND e.data_json::json ->> 'startId' IS NOT DISTINCT FROM NEW.start_id;
    WHEN 'audit_receipts' THEN
      SELECT true INTO found FROM ql3.events e
       WHERE e.event_id = 'receipt:' || NEW.audit_receipt_id AND e.event_type = 'AuditReceiptIssued'
         AND e.data_json::json ->> 'startId' IS NOT DISTINCT FROM NEW.start_id;
    WHEN 'step_run_mutations' THEN
      SELECT true INTO found FROM ql3.events e
       WHERE e.event_id = NEW.run_event_id AND e.event_type = 'StepRunStarted'
         AND e.stream_id = 'run-' || NEW.run_id AND e.data_json::json ->> 'startId' IS NOT DISTINCT FROM NEW.start_id
         AND e.data_json::json ->> 'mutationId' IS NOT DISTINCT FROM NEW.mutation_id;
  END CASE;
  IF found IS NOT TRUE THEN
    PERFORM ql3.refuse_history(format('a %s row of start %s has no event of its own in the log', TG_TABLE_NAME, NEW.start_id));
  END IF;
  RETURN NEW;
END
$fn$;

-- A barrier binds the facts it names, each its own: every one carries the barrier's start id, so
-- a fact (and the identity its key holds) binds one barrier at most, and the runtime cannot bind
-- another start's facts. A compacted start's identities stay bound: reusing one is the unique
-- violation a live one raises (one statement probes all seven).
CREATE FUNCTION ql3.barrier_binds_its_facts() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  reused record;
  other text;
BEGIN
  SELECT c.identity, c.value INTO reused FROM ql3.compacted_identities c
   WHERE (c.identity, c.value) IN (('startId', NEW.start_id), ('mutationId', NEW.mutation_id), ('runEventId', NEW.run_event_id),
           ('traceId', NEW.trace_id), ('auditEventId', NEW.audit_event_id), ('auditReceiptId', NEW.audit_receipt_id),
           ('attempt', '[' || to_json(NEW.run_id)::text || ',' || to_json(NEW.step_run_id)::text || ',' || NEW.started_step_run_version::text || ']'))
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'duplicate key value violates unique constraint "compacted_identities_pkey"'
      USING ERRCODE = 'unique_violation', CONSTRAINT = 'compacted_identities_pkey', TABLE = 'compacted_identities', SCHEMA = 'ql3',
            DETAIL = format('Key (identity, value)=(%s, %s) already exists (compacted, R14.2).', reused.identity, reused.value);
  END IF;
  -- a missing fact is the foreign keys' to refuse, at the end of the statement
  SELECT f.what INTO other FROM (
    SELECT 'step run mutation' AS what, m.start_id FROM ql3.step_run_mutations m WHERE m.mutation_id = NEW.mutation_id
    UNION ALL SELECT 'trace anchor', t.start_id FROM ql3.trace_anchors t WHERE t.trace_id = NEW.trace_id
    UNION ALL SELECT 'security audit event', a.start_id FROM ql3.security_audit_events a WHERE a.audit_event_id = NEW.audit_event_id
    UNION ALL SELECT 'audit receipt', r.start_id FROM ql3.audit_receipts r WHERE r.audit_receipt_id = NEW.audit_receipt_id
    UNION ALL SELECT 'RunEvent', CASE WHEN e.event_type = 'StepRunStarted' THEN e.data_json::json ->> 'startId' END
                FROM ql3.events e WHERE e.event_id = NEW.run_event_id
  ) f WHERE f.start_id IS DISTINCT FROM NEW.start_id LIMIT 1;
  IF other IS NOT NULL THEN
    PERFORM ql3.refuse_history(format('barrier %s names a %s of another start', NEW.start_id, other));
  END IF;
  RETURN NEW;
END
$fn$;

CREATE FUNCTION ql3.in_doubt_from_barrier() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  INSERT INTO ql3.in_doubt_starts (start_id, project_id, run_id, committed_at_ms)
    VALUES (NEW.start_id, NEW.project_id, NEW.run_id, NEW.committed_at_ms);
  RETURN NULL;
END
$fn$;

CREATE FUNCTION ql3.in_doubt_leave_on_outcome() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  DELETE FROM ql3.in_doubt_starts WHERE start_id = NEW.start_id;
  RETURN NULL;
END
$fn$;

CREATE FUNCTION ql3.driver_claim_follows_rules() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  prev record;
BEGIN
  IF NEW.claim_digest IS DISTINCT FROM ql3.fields_digest('qinglong/driver-claim@v1',
       ARRAY[NEW.start_id, NEW.generation::text, NEW.kind, NEW.driver_id, NEW.at_ms::text, NEW.lease_until_ms::text]) THEN
    PERFORM ql3.refuse_history(format('driver claim %s generation %s: claim_digest does not bind its cells (R9.2)', NEW.start_id, NEW.generation));
  END IF;
  IF NEW.at_ms IS DISTINCT FROM (extract(epoch FROM transaction_timestamp()) * 1000)::bigint THEN
    PERFORM ql3.refuse_history(format('driver claim %s generation %s: at_ms is not the transaction clock (R11.2)', NEW.start_id, NEW.generation));
  END IF;
  IF NEW.kind = 'claim' THEN
    SELECT c.generation, least(c.lease_until_ms, coalesce(r.at_ms, c.lease_until_ms)) AS ended INTO prev
      FROM ql3.adapter_driver_claims c
      LEFT JOIN ql3.adapter_driver_claims r ON r.start_id = c.start_id AND r.generation = c.generation AND r.kind = 'release'
     WHERE c.start_id = NEW.start_id AND c.kind = 'claim'
     ORDER BY c.generation DESC LIMIT 1;
    IF NEW.generation <= coalesce(prev.generation, 0) THEN
      -- A racer claimed this generation first: under READ COMMITTED this statement sees its
      -- commit, which the claimer's own read did not. The primary key's answer, so the claimer
      -- reads again and finds the holder (a race, never damage).
      RAISE EXCEPTION 'driver claim % generation %: that generation is claimed already', NEW.start_id, NEW.generation
        USING ERRCODE = 'unique_violation', CONSTRAINT = 'adapter_driver_claims_pkey';
    END IF;
    IF NEW.generation IS DISTINCT FROM coalesce(prev.generation, 0) + 1 THEN
      PERFORM ql3.refuse_history(format('driver claim %s generation %s: a claim takes the next generation of its start, %s (R11.2)',
        NEW.start_id, NEW.generation, coalesce(prev.generation, 0) + 1));
    END IF;
    IF prev.ended IS NOT NULL AND NEW.at_ms < prev.ended THEN
      PERFORM ql3.refuse_history(format('driver claim %s generation %s: a claim while the generation before it still holds, until %s (R11.2)',
        NEW.start_id, NEW.generation, prev.ended));
    END IF;
    IF NOT (NEW.lease_until_ms > NEW.at_ms AND NEW.lease_until_ms - NEW.at_ms <= 90000000) THEN
      PERFORM ql3.refuse_history(format('driver claim %s generation %s: a claim leases from its time, for at most 25 hours (R11.2)', NEW.start_id, NEW.generation));
    END IF;
  ELSIF NEW.at_ms IS DISTINCT FROM NEW.lease_until_ms
     OR NOT EXISTS (SELECT 1 FROM ql3.adapter_driver_claims c
                     WHERE c.start_id = NEW.start_id AND c.generation = NEW.generation AND c.kind = 'claim' AND c.driver_id = NEW.driver_id) THEN
    PERFORM ql3.refuse_history(format('driver claim %s generation %s: a release ends a generation its own driver claimed, stamped once (R11.2)', NEW.start_id, NEW.generation));
  END IF;
  RETURN NEW;
END
$fn$;

-- R12.3: a claim leases for at most its barrier's timeout plus 300 s, and a start is claimed at most 32 times.
CREATE FUNCTION ql3.driver_claim_lease_bound() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  timeout_ms bigint;
BEGIN
  SELECT ((e.data_json::json -> 'barrier' -> 'admission' ->> 'timeoutMs'))::bigint INTO timeout_ms
    FROM ql3.events e WHERE e.event_id = 'barrier:' || NEW.start_id;
  IF timeout_ms IS NOT NULL AND NEW.lease_until_ms - NEW.at_ms > timeout_ms + 300000 THEN
    PERFORM ql3.refuse_history(format('driver claim %s generation %s: a claim leases for at most its barrier''s timeout plus 300 s (R12.3)', NEW.start_id, NEW.generation));
  END IF;
  IF NEW.generation > 32 THEN
    PERFORM ql3.refuse_history(format('driver claim %s generation %s: a start is claimed at most 32 times (R12.3)', NEW.start_id, NEW.generation));
  END IF;
  RETURN NEW;
END
$fn$;

CREATE FUNCTION ql3.resolution_notes_purge_only() RETURNS trigger
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
END
$fn$;

CREATE FUNCTION ql3.invocation_plans_shred_only() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
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

CREATE FUNCTION ql3.schema_migrations_digest() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  NEW.ledger_digest := ql3.fields_digest('qinglong/migration-ledger@v1', ARRAY[NEW.name, NEW.checksum, NEW.applied_at_ms::text]);
  RETURN NEW;
END
$fn$;

-- ------------------------------------------------------------------ functions: called by the roles

-- The Run turn is the Run head's row lock. take_start_turn takes it (without waiting, except on
-- a last attempt) and compares the version the start was decided on (Q3T01: busy or moved,
-- nothing written); take_run_turn takes it for the other writers; await_run_turn waits for it,
-- bounded, outside any transaction.
-- take_start_gate answers whether this transaction holds the gate alone.
CREATE FUNCTION ql3.take_start_gate(p_alone boolean) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  deadline timestamptz := clock_timestamp() + interval '20 ms';
BEGIN
  IF p_alone THEN
    -- First asked for without waiting, again every millisecond: no writer waits behind that.
    LOOP
      BEGIN
        LOCK TABLE ql3.start_gate IN ACCESS EXCLUSIVE MODE NOWAIT;
        RETURN true;
      EXCEPTION WHEN lock_not_available THEN
        EXIT WHEN clock_timestamp() >= deadline;
      END;
      PERFORM pg_sleep(0.001);
    END LOOP;
    -- Under steady load some writer is always running: wait in the queue, briefly (writers that
    -- come meanwhile wait behind the request, at most that long).
    BEGIN
      PERFORM ql3.wait_start_gate_alone();
      RETURN true;
    EXCEPTION WHEN lock_not_available THEN
      NULL; -- held all along (pg_dump): run as any other attempt
    END;
  END IF;
  LOCK TABLE ql3.start_gate IN ACCESS SHARE MODE;
  RETURN false;
END
$fn$;

-- The Run head's row lock for a writer. Held alone, the gate leaves no other writer inside a
-- transaction, so the row is held at most for a moment by an await_run_turn (or by an owner's
-- session): a last attempt waits for it, within lock_timeout, instead of losing its turn to a
-- writer that is only waiting. Every other attempt takes it without waiting.
CREATE FUNCTION ql3.lock_run_head(p_run_id text, p_alone boolean) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  v bigint;
BEGIN
  IF ql3.take_start_gate(p_alone) THEN
    SELECT version INTO v FROM ql3.runs WHERE run_id = p_run_id FOR UPDATE;
  ELSE
    SELECT version INTO v FROM ql3.runs WHERE run_id = p_run_id FOR UPDATE NOWAIT;
  END IF;
  RETURN v;
END
$fn$;

CREATE FUNCTION ql3.wait_start_gate_alone() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  LOCK TABLE ql3.start_gate IN ACCESS EXCLUSIVE MODE;
END
$fn$;

CREATE FUNCTION ql3.take_start_turn(p_run_id text, p_expected_version bigint, p_alone boolean) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  v bigint;
BEGIN
  BEGIN
    v := ql3.lock_run_head(p_run_id, p_alone);
  EXCEPTION WHEN lock_not_available OR serialization_failure THEN
    RAISE EXCEPTION 'the turn of Run % is held by another writer; nothing was written', p_run_id
      USING ERRCODE = 'Q3T01', DETAIL = 'busy';
  END;
  IF v IS DISTINCT FROM p_expected_version THEN
    RAISE EXCEPTION 'Run % is at version %, not % as read; nothing was written', p_run_id, coalesce(v::text, 'none'), p_expected_version
      USING ERRCODE = 'Q3T01', DETAIL = 'moved';
  END IF;
  RETURN (extract(epoch FROM transaction_timestamp()) * 1000)::bigint;
END
$fn$;

CREATE FUNCTION ql3.take_run_turn(p_run_id text, p_alone boolean) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  RETURN ql3.lock_run_head(p_run_id, p_alone);
END
$fn$;

CREATE FUNCTION ql3.await_run_turn(p_run_id text, p_lock_timeout_ms integer) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  PERFORM set_config('lock_timeout', greatest(p_lock_timeout_ms, 1)::text, true);
  PERFORM 1 FROM ql3.runs WHERE run_id = p_run_id FOR UPDATE;
  RETURN FOUND;
END
$fn$;

-- Every row a read of one barrier re-verifies (R5.3), in the columns and order the reader
-- names (infrastructure/postgres/barrierReadSql.ts, which a spec holds this body to). A function
-- so that the first read of a start runs it only when its replay lookup hit: a new start's read
-- never builds it.
CREATE FUNCTION ql3.read_barrier_rows(p_start_id text)
  RETURNS TABLE (barriers json, audits json, traces json, receipts json, mutations json, events json,
                 event_data_1 text, event_data_2 text, event_data_3 text, event_data_4 text, event_data_5 text, macs json)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH
    b AS (SELECT * FROM ql3.tool_execution_start_barriers WHERE start_id = p_start_id),
    anchor AS (SELECT e.stream_id, e.stream_position FROM ql3.events e JOIN b ON e.event_id = b.run_event_id),
    around AS (
      SELECT e.global_position, e.stream_id, e.stream_position, e.event_id, e.event_type, e.data_json, e.committed_at_ms,
             (e.stream_position - anchor.stream_position + 4)::int AS n
        FROM anchor JOIN ql3.events e ON e.stream_id = anchor.stream_id
                                     AND e.stream_position BETWEEN anchor.stream_position - 3 AND anchor.stream_position + 1)
  SELECT
    (SELECT json_agg(json_build_array(b.start_id, b.command_digest, b.barrier_digest, b.project_id, b.run_id, b.step_run_id, b.started_step_run_version, b.started_step_run_digest, b.mutation_id, b.mutation_digest, b.run_event_id, b.trace_id, b.trace_digest, b.audit_event_id, b.audit_receipt_id, b.audit_receipt_digest, b.adapter_id, b.committed_at_ms)) FROM b) AS barriers,
    (SELECT json_agg(json_build_array(a.audit_event_id, a.start_id, a.run_id, a.step_run_id, a.audit_event_digest, a.committed_at_ms)) FROM ql3.security_audit_events a WHERE a.audit_event_id IN (SELECT audit_event_id FROM b)) AS audits,
    (SELECT json_agg(json_build_array(t.trace_id, t.span_id, t.start_id, t.run_id, t.step_run_id, t.trace_digest, t.committed_at_ms)) FROM ql3.trace_anchors t WHERE t.trace_id IN (SELECT trace_id FROM b)) AS traces,
    (SELECT json_agg(json_build_array(r.audit_receipt_id, r.audit_event_id, r.trace_id, r.start_id, r.receipt_digest, r.committed_at_ms)) FROM ql3.audit_receipts r WHERE r.audit_receipt_id IN (SELECT audit_receipt_id FROM b)) AS receipts,
    (SELECT json_agg(json_build_array(m.mutation_id, m.run_event_id, m.start_id, m.run_id, m.step_run_id, m.from_status, m.to_status, m.from_version, m.to_version, m.run_event_sequence, m.mutation_digest, m.started_step_run_digest, m.requested_at_ms, m.committed_at_ms)) FROM ql3.step_run_mutations m WHERE m.mutation_id IN (SELECT mutation_id FROM b)) AS mutations,
    (SELECT json_agg(json_build_array(around.n, around.global_position, around.stream_id, around.stream_position, around.event_id, around.event_type, around.committed_at_ms) ORDER BY n) FROM around) AS events,
    (SELECT data_json FROM around WHERE n = 1) AS event_data_1,
    (SELECT data_json FROM around WHERE n = 2) AS event_data_2,
    (SELECT data_json FROM around WHERE n = 3) AS event_data_3,
    (SELECT data_json FROM around WHERE n = 4) AS event_data_4,
    (SELECT data_json FROM around WHERE n = 5) AS event_data_5,
    (SELECT json_agg(m) FROM ql3.start_evidence_macs m WHERE m.start_id = p_start_id AND EXISTS (SELECT 1 FROM b)) AS macs;
END
$fn$;

CREATE FUNCTION ql3.purge_resolution_note(p_start_id text, p_note_digest text) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  n integer;
  t bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
BEGIN
  UPDATE ql3.resolution_notes SET note_text = NULL, purged_at_ms = t,
         purge_digest = ql3.fields_digest('qinglong/note-purge@v1', ARRAY[start_id, note_digest, t::text])
   WHERE start_id = p_start_id AND note_digest = p_note_digest AND note_text IS NOT NULL;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$fn$;

CREATE FUNCTION ql3.shred_invocation_plan(p_start_id text) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  n integer;
BEGIN
  UPDATE ql3.invocation_plans SET key_id = NULL, nonce = NULL, ciphertext = NULL
   WHERE start_id = p_start_id AND ciphertext IS NOT NULL;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$fn$;

CREATE FUNCTION ql3.require_sync_standby() RETURNS integer
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  attached integer;
  hidden integer;
BEGIN
  SELECT count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')), count(*) FILTER (WHERE sync_state IS NULL)
    INTO attached, hidden
    FROM pg_stat_replication;
  IF attached > 0 THEN
    RETURN attached;
  END IF;
  IF hidden > 0 THEN
    RAISE EXCEPTION 'the states of the attached standbys are hidden from ql3_owner (GRANT pg_read_all_stats TO ql3_owner)'
      USING ERRCODE = 'Q3S01', DETAIL = 'hidden';
  END IF;
  RAISE EXCEPTION 'the primary has no synchronous standby attached (pg_stat_replication: none in sync or quorum state)'
    USING ERRCODE = 'Q3S01', DETAIL = 'none';
END
$fn$;

-- Retention (R14.2): checks the rule itself, writes the record and the identities, deletes the Run's rows.
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
     OR jsonb_array_length(r->'identities') <> 7 * cardinality(v_starts) THEN
    RAISE EXCEPTION 'compaction refused: the record does not bind the Run as stored' USING ERRCODE = 'check_violation';
  END IF;
  INSERT INTO ql3.run_compactions (run_id, record_json, compaction_digest) VALUES (v_run, p_record_json, p_digest);
  INSERT INTO ql3.compacted_identities (identity, value, start_id, run_id, command_digest, barrier_digest)
    SELECT k.identity, k.value, b.start_id, v_run, b.command_digest, b.barrier_digest
      FROM ql3.tool_execution_start_barriers b
      CROSS JOIN LATERAL (VALUES ('startId', b.start_id), ('mutationId', b.mutation_id), ('runEventId', b.run_event_id),
        ('traceId', b.trace_id), ('auditEventId', b.audit_event_id), ('auditReceiptId', b.audit_receipt_id),
        ('attempt', '[' || to_json(b.run_id)::text || ',' || to_json(b.step_run_id)::text || ',' || b.started_step_run_version::text || ']')) k (identity, value)
     WHERE b.start_id = ANY (v_starts);
  DELETE FROM ql3.start_outcomes WHERE start_id = ANY (v_starts);
  DELETE FROM ql3.adapter_driver_claims WHERE start_id = ANY (v_starts);
  DELETE FROM ql3.start_evidence_macs WHERE start_id = ANY (v_starts);
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

-- ------------------------------------------------------------------ data moved forward

-- The chain over the events already stored, each stream in position order; the append-only
-- trigger is lifted for this statement alone, inside this transaction.
ALTER TABLE ql3.events DISABLE TRIGGER events_append_only;
DO $chain$
DECLARE
  r record;
  previous text := '';
  stream text := NULL;
BEGIN
  FOR r IN SELECT global_position, stream_id, stream_position, event_id, event_type, data_json, committed_at_ms
             FROM ql3.events ORDER BY stream_id, stream_position LOOP
    IF stream IS DISTINCT FROM r.stream_id THEN
      stream := r.stream_id;
      previous := '';
    END IF;
    previous := ql3.event_chain_digest(previous, r.stream_id, r.stream_position, r.event_id, r.event_type, r.data_json, r.committed_at_ms);
    UPDATE ql3.events SET chain_digest = previous WHERE global_position = r.global_position;
  END LOOP;
END
$chain$;
ALTER TABLE ql3.events ENABLE TRIGGER events_append_only;
ALTER TABLE ql3.events ALTER COLUMN chain_digest SET NOT NULL;

UPDATE ql3.schema_migrations SET ledger_digest = ql3.fields_digest('qinglong/migration-ledger@v1', ARRAY[name, checksum, applied_at_ms::text]);

-- The outcomes already in the log, then the starts still in doubt.
INSERT INTO ql3.start_outcomes (start_id, run_id, step_run_id, outcome, decided_by, reason, outcome_digest, step_run_version,
    event_id, stream_position, requested_at_ms, committed_at_ms)
SELECT d ->> 'startId', d ->> 'runId', d ->> 'stepRunId',
       CASE e.event_type WHEN 'StepRunCompleted' THEN 'completed' WHEN 'StepRunFailed' THEN 'failed' ELSE 'lost' END,
       d -> 'resolution' ->> 'decidedBy', d -> 'resolution' ->> 'reason', d ->> 'outcomeDigest', (d ->> 'stepRunVersion')::bigint,
       e.event_id, e.stream_position, (d ->> 'occurredAtMs')::bigint, e.committed_at_ms
  FROM ql3.events e CROSS JOIN LATERAL (SELECT e.data_json::jsonb AS d) j
 WHERE e.event_type IN ('StepRunCompleted', 'StepRunFailed', 'StepRunLost')
 ORDER BY e.global_position;
INSERT INTO ql3.in_doubt_starts (start_id, project_id, run_id, committed_at_ms)
  SELECT b.start_id, b.project_id, b.run_id, b.committed_at_ms FROM ql3.tool_execution_start_barriers b
   WHERE NOT EXISTS (SELECT 1 FROM ql3.start_outcomes o WHERE o.start_id = b.start_id);

-- ------------------------------------------------------------------ triggers, by table

CREATE TRIGGER schema_migrations_digest BEFORE INSERT ON ql3.schema_migrations
  FOR EACH ROW EXECUTE FUNCTION ql3.schema_migrations_digest();

CREATE TRIGGER streams_not_compacted BEFORE INSERT ON ql3.streams
  FOR EACH ROW EXECUTE FUNCTION ql3.stream_not_compacted();

CREATE TRIGGER events_append_run_event BEFORE INSERT ON ql3.events
  FOR EACH ROW EXECUTE FUNCTION ql3.append_run_event();
CREATE TRIGGER events_start_follows_log BEFORE INSERT ON ql3.events
  FOR EACH ROW WHEN (NEW.event_type = 'ToolExecutionStartBarrierCommitted') EXECUTE FUNCTION ql3.start_follows_log();
CREATE TRIGGER events_step_run_follows_log BEFORE INSERT ON ql3.events
  FOR EACH ROW WHEN (NEW.event_type IN ('StepRunReady', 'StepRunAwaitingApproval', 'StepRunLost', 'StepRunCompleted', 'StepRunFailed'))
  EXECUTE FUNCTION ql3.step_run_event_follows_log();
CREATE TRIGGER events_move_run_heads AFTER INSERT ON ql3.events
  REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION ql3.move_run_heads();
CREATE TRIGGER events_project_start_outcome AFTER INSERT ON ql3.events
  FOR EACH ROW WHEN (NEW.event_type IN ('StepRunCompleted', 'StepRunFailed', 'StepRunLost')) EXECUTE FUNCTION ql3.project_start_outcome();
-- checked at commit: a start's first fact is followed by the rest of it, its StepRun move and barrier
CREATE CONSTRAINT TRIGGER events_whole_start AFTER INSERT ON ql3.events DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW WHEN (NEW.event_type = 'SecurityAuditEventRecorded') EXECUTE FUNCTION ql3.require_whole_start();

CREATE TRIGGER security_audit_events_beside_their_event BEFORE INSERT ON ql3.security_audit_events
  FOR EACH ROW EXECUTE FUNCTION ql3.fact_beside_its_event();
CREATE TRIGGER trace_anchors_beside_their_event BEFORE INSERT ON ql3.trace_anchors
  FOR EACH ROW EXECUTE FUNCTION ql3.fact_beside_its_event();
CREATE TRIGGER audit_receipts_beside_their_event BEFORE INSERT ON ql3.audit_receipts
  FOR EACH ROW EXECUTE FUNCTION ql3.fact_beside_its_event();
CREATE TRIGGER step_run_mutations_beside_their_event BEFORE INSERT ON ql3.step_run_mutations
  FOR EACH ROW EXECUTE FUNCTION ql3.fact_beside_its_event();

CREATE TRIGGER tool_execution_start_barriers_bind_facts BEFORE INSERT ON ql3.tool_execution_start_barriers
  FOR EACH ROW EXECUTE FUNCTION ql3.barrier_binds_its_facts();
CREATE TRIGGER in_doubt_starts_from_barrier AFTER INSERT ON ql3.tool_execution_start_barriers
  FOR EACH ROW EXECUTE FUNCTION ql3.in_doubt_from_barrier();

CREATE TRIGGER start_outcomes_append_only BEFORE UPDATE OR DELETE ON ql3.start_outcomes
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('start outcomes are facts: append a new event instead');
CREATE TRIGGER start_outcomes_no_truncate BEFORE TRUNCATE ON ql3.start_outcomes
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('start outcomes are facts: append a new event instead');
CREATE TRIGGER in_doubt_starts_leave_on_outcome AFTER INSERT ON ql3.start_outcomes
  FOR EACH ROW EXECUTE FUNCTION ql3.in_doubt_leave_on_outcome();

-- in_doubt_starts: its rows leave (DELETE, by the outcome's trigger), never change
CREATE TRIGGER in_doubt_starts_no_update BEFORE UPDATE ON ql3.in_doubt_starts
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('an in-doubt index row is never changed');
CREATE TRIGGER in_doubt_starts_no_truncate BEFORE TRUNCATE ON ql3.in_doubt_starts
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('the in-doubt index is the image of the barriers and outcomes');

CREATE TRIGGER resolution_notes_purge_only BEFORE UPDATE OR DELETE ON ql3.resolution_notes
  FOR EACH ROW EXECUTE FUNCTION ql3.resolution_notes_purge_only();

CREATE TRIGGER adapter_driver_claims_follow_rules BEFORE INSERT ON ql3.adapter_driver_claims
  FOR EACH ROW EXECUTE FUNCTION ql3.driver_claim_follows_rules();
CREATE TRIGGER adapter_driver_claims_lease_bound BEFORE INSERT ON ql3.adapter_driver_claims
  FOR EACH ROW WHEN (NEW.kind = 'claim') EXECUTE FUNCTION ql3.driver_claim_lease_bound();
CREATE TRIGGER adapter_driver_claims_append_only BEFORE UPDATE OR DELETE ON ql3.adapter_driver_claims
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('driver claims are facts: append a new generation instead');
CREATE TRIGGER adapter_driver_claims_no_truncate BEFORE TRUNCATE ON ql3.adapter_driver_claims
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('driver claims are facts: append a new generation instead');

CREATE TRIGGER start_evidence_macs_append_only BEFORE UPDATE OR DELETE ON ql3.start_evidence_macs
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('evidence MACs are immutable');
CREATE TRIGGER start_evidence_macs_no_truncate BEFORE TRUNCATE ON ql3.start_evidence_macs
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('evidence MACs are immutable');
CREATE TRIGGER run_event_macs_append_only BEFORE UPDATE OR DELETE ON ql3.run_event_macs
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('event seals are immutable');
CREATE TRIGGER run_event_macs_no_truncate BEFORE TRUNCATE ON ql3.run_event_macs
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('event seals are immutable');
CREATE TRIGGER run_event_seal_origins_append_only BEFORE UPDATE OR DELETE ON ql3.run_event_seal_origins
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('event seals are immutable');
CREATE TRIGGER run_event_seal_origins_no_truncate BEFORE TRUNCATE ON ql3.run_event_seal_origins
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('event seals are immutable');

CREATE TRIGGER invocation_plans_shred_only BEFORE UPDATE OR DELETE ON ql3.invocation_plans
  FOR EACH ROW EXECUTE FUNCTION ql3.invocation_plans_shred_only();
CREATE TRIGGER invocation_plans_no_truncate BEFORE TRUNCATE ON ql3.invocation_plans
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('an invocation plan is shredded, never deleted');

CREATE TRIGGER run_compactions_immutable BEFORE UPDATE OR DELETE ON ql3.run_compactions
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('compaction records are immutable');
CREATE TRIGGER run_compactions_no_truncate BEFORE TRUNCATE ON ql3.run_compactions
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('compaction records are immutable');
CREATE TRIGGER compacted_identities_immutable BEFORE UPDATE OR DELETE ON ql3.compacted_identities
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('compacted identities are immutable');
CREATE TRIGGER compacted_identities_no_truncate BEFORE TRUNCATE ON ql3.compacted_identities
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('compacted identities are immutable');

-- ------------------------------------------------------------------ grants

-- The runtime appends and never rewrites: no UPDATE, DELETE or TRUNCATE anywhere, no INSERT on
-- the heads (the triggers write them), and on events only the columns a writer supplies (the
-- global position and the chain digest are the server's).
REVOKE UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA ql3 FROM ql3_runtime;
REVOKE INSERT ON ql3.streams, ql3.runs, ql3.step_runs FROM ql3_runtime;
REVOKE INSERT ON ql3.events FROM ql3_runtime;
GRANT INSERT (stream_id, stream_position, event_id, event_type, data_json, committed_at_ms) ON ql3.events TO ql3_runtime;

REVOKE ALL ON ql3.start_outcomes, ql3.in_doubt_starts, ql3.resolution_notes, ql3.adapter_driver_claims, ql3.start_evidence_macs,
  ql3.run_event_macs, ql3.run_event_seal_origins, ql3.invocation_plans, ql3.start_gate, ql3.run_compactions, ql3.compacted_identities FROM PUBLIC;
GRANT SELECT ON ql3.start_outcomes, ql3.in_doubt_starts TO ql3_runtime, ql3_admin, ql3_reader;
GRANT SELECT, INSERT ON ql3.resolution_notes TO ql3_runtime;
GRANT SELECT ON ql3.resolution_notes TO ql3_admin, ql3_reader;
GRANT SELECT, INSERT ON ql3.adapter_driver_claims TO ql3_runtime;
GRANT SELECT ON ql3.adapter_driver_claims TO ql3_admin;
GRANT SELECT, INSERT ON ql3.start_evidence_macs, ql3.run_event_macs, ql3.run_event_seal_origins, ql3.invocation_plans TO ql3_runtime;
-- LOCK TABLE asks for UPDATE (or more) on the table it locks; the gate holds no rows to update.
GRANT UPDATE ON ql3.start_gate TO ql3_runtime;
GRANT SELECT ON ql3.run_compactions, ql3.compacted_identities TO ql3_runtime, ql3_retention;

-- Functions: no PUBLIC right on any; each role calls what it needs.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA ql3 FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql3.take_start_turn(text, bigint, boolean), ql3.take_run_turn(text, boolean), ql3.await_run_turn(text, integer),
  ql3.purge_resolution_note(text, text), ql3.shred_invocation_plan(text), ql3.require_sync_standby(), ql3.read_barrier_rows(text) TO ql3_runtime;
GRANT EXECUTE ON FUNCTION ql3.compact_run(text, text) TO ql3_retention;
-- refuse_change runs with the rights of whoever attempts the change, and asks this one.
GRANT EXECUTE ON FUNCTION ql3.compacted_row(jsonb) TO PUBLIC;
