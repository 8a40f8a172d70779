-- R9.1, the same checks for less of the server's CPU per start (every value and refusal as
-- before; a start's rows, WAL and round trips unchanged):
--  * The event trigger's helpers (pg-0054) are LANGUAGE sql again, STABLE and without a SET
--    clause, so the planner inlines each into the trigger's expressions: no function call, no
--    search_path switch per call (a SET clause costs one on every call, and bars inlining).
--    Their only callers are the SECURITY DEFINER functions of this schema, which pin
--    search_path to pg_catalog, pg_temp before any of this is planned; no product role may call
--    them (EXECUTE is the owner's alone, unchanged), and every function in them is named with
--    its pg_catalog schema. STABLE, not IMMUTABLE: convert_to and to_json are STABLE, and an
--    IMMUTABLE function with a STABLE body is not inlined. No index or constraint uses them.
--  * The fact before a start fact is parsed as jsonb only for the barrier (eleven fields are
--    compared); the others read its one startId from json.
--  * events.data_json is compressed with lz4 where the server has it: PostgreSQL compresses a
--    row above about 2 KB (the barrier event), and lz4 stores it in the same bytes for a fraction
--    of pglz's CPU. Rows written before keep pglz; both read back the same
--    text. A server without lz4 keeps pglz.
SET LOCAL ROLE ql3_owner;

CREATE OR REPLACE FUNCTION ql3.step_run_json(st jsonb, with_last boolean) RETURNS text
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

CREATE OR REPLACE FUNCTION ql3.tagged_digest(tag text, body text) RETURNS text
LANGUAGE sql STABLE STRICT AS $fn$
  SELECT 'sha256:' || pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(tag, 'UTF8') || '\x00'::bytea || pg_catalog.convert_to(body, 'UTF8')), 'hex')
$fn$;

CREATE OR REPLACE FUNCTION ql3.event_chain_digest(previous text, stream_id text, stream_position bigint, event_id text, event_type text,
    data_json text, committed_at_ms bigint) RETURNS text
LANGUAGE sql STABLE STRICT AS $fn$
  SELECT 'sha256:' || pg_catalog.encode(pg_catalog.sha256(
    pg_catalog.convert_to('qinglong/run-event-chain@v1', 'UTF8') || '\x00'::bytea || pg_catalog.convert_to(previous, 'UTF8') || '\x00'::bytea
    || pg_catalog.convert_to(stream_id, 'UTF8') || '\x00'::bytea || pg_catalog.convert_to(stream_position::text, 'UTF8') || '\x00'::bytea
    || pg_catalog.convert_to(event_id, 'UTF8') || '\x00'::bytea || pg_catalog.convert_to(event_type, 'UTF8') || '\x00'::bytea
    || pg_catalog.convert_to(data_json, 'UTF8') || '\x00'::bytea || pg_catalog.convert_to(committed_at_ms::text, 'UTF8')), 'hex')
$fn$;

CREATE OR REPLACE FUNCTION ql3.append_run_event() RETURNS trigger
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
    SELECT e.event_type, e.chain_digest, CASE WHEN e.event_type IN ('SecurityAuditEventRecorded', 'TraceAnchorRecorded', 'AuditReceiptIssued', 'StepRunStarted')
             THEN e.data_json END
      INTO prev_type, prev_chain, prev_text
      FROM ql3.events e WHERE e.stream_id = NEW.stream_id AND e.stream_position = NEW.stream_position - 1;
    IF NOT FOUND THEN
      PERFORM ql3.refuse_history(format('%s@%s leaves a gap: there is no event at %s', NEW.stream_id, NEW.stream_position, NEW.stream_position - 1));
    END IF;
    IF NEW.event_type = 'RunCreated' THEN PERFORM ql3.refuse_history(format('%s@%s: a Run is created once', NEW.stream_id, NEW.stream_position)); END IF;
    -- The heads move once per statement (ql3.move_run_heads), so within one they stay where it
    -- found them: each event must lie past the head, and follow an event that exists.
    SELECT s.version INTO head FROM ql3.streams s WHERE s.stream_id = NEW.stream_id;
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

DO $lz4$
BEGIN
  EXECUTE 'ALTER TABLE ql3.events ALTER COLUMN data_json SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value OR syntax_error THEN
  NULL; -- a server without lz4 (or before PostgreSQL 14): pglz, as before
END
$lz4$;
