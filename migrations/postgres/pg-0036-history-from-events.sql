-- R9.1: the database keeps the history legal. The runtime only INSERTs events (and the fact
-- rows of a start); this trigger, owned by ql3_owner, checks each inserted event against the
-- heads and moves the heads itself: the stream head and the Run head by exactly one position,
-- and the StepRun head by the transition the lifecycle allows (domain/lifecycle.ts,
-- domain/startDecider.ts), with its state and digest derived here from the event. It refuses:
--   a stream position that is not the previous + 1, or a stream not opened by RunCreated;
--   a commit time that is not the transaction clock (R3.10);
--   a StepRun move the lifecycle does not allow, or a StepRun version that is not previous + 1
--     (a completed StepRun can never become ready or running again);
--   a StepRunStarted that does not start from the StepRun head, or whose started digest is not
--     the digest of the state it makes;
--   the five facts of a start out of order, or a barrier that does not match its StepRunStarted;
--   an event id that is not the one its fact names.
-- It also sets the event's chain digest (pg-0035): a supplied link that differs is refused.
-- The domain decider stays the author of decisions; this is the last line that refuses forged ones.
SET LOCAL ROLE ql3_owner;

-- One SQLSTATE for every refusal, so the adapter maps it to a typed error.
CREATE FUNCTION ql3.refuse_history(what text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  RAISE EXCEPTION 'illegal history refused: % (R9.1)', what USING ERRCODE = 'Q3H01';
END
$fn$;
REVOKE ALL ON FUNCTION ql3.refuse_history(text) FROM PUBLIC;

-- The canonical JSON (RFC 8785) of a StepRun state, as projections/rows.ts writes it: keys in
-- code-unit order, optional keys only when present. Every value is an identity, a digest, a
-- closed enum or an integer (their codecs), so to_json's string escaping is JSON.stringify's.
-- `with_last` false gives the body of the StepRun digest (domain/state.ts stepRunDigest).
CREATE FUNCTION ql3.step_run_json(st jsonb, with_last boolean) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT '{' || concat_ws(',',
    CASE WHEN st ? 'approval' THEN '"approval":{"approvalDigest":' || to_json(st #>> '{approval,approvalDigest}')::text
      || ',"approvalRequestId":' || to_json(st #>> '{approval,approvalRequestId}')::text
      || ',"dispatchId":' || to_json(st #>> '{approval,dispatchId}')::text || '}' END,
    '"kind":' || to_json(st ->> 'kind')::text,
    CASE WHEN with_last AND st ? 'lastStartId' THEN '"lastStartId":' || to_json(st ->> 'lastStartId')::text END,
    '"projectId":' || to_json(st ->> 'projectId')::text,
    '"runId":' || to_json(st ->> 'runId')::text,
    '"status":' || to_json(st ->> 'status')::text,
    '"stepRunId":' || to_json(st ->> 'stepRunId')::text,
    CASE WHEN st ? 'toolDefinition' THEN '"toolDefinition":{"digest":' || to_json(st #>> '{toolDefinition,digest}')::text
      || ',"id":' || to_json(st #>> '{toolDefinition,id}')::text || '}' END,
    '"version":' || (st ->> 'version')) || '}'
$fn$;
REVOKE ALL ON FUNCTION ql3.step_run_json(jsonb, boolean) FROM PUBLIC;

-- sha256(tag || 0x00 || body), as domain/canonical.ts digestCanonical.
CREATE FUNCTION ql3.tagged_digest(tag text, body text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT 'sha256:' || encode(sha256(convert_to(tag, 'UTF8') || '\x00'::bytea || convert_to(body, 'UTF8')), 'hex')
$fn$;
REVOKE ALL ON FUNCTION ql3.tagged_digest(text, text) FROM PUBLIC;

CREATE FUNCTION ql3.append_run_event() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  d jsonb := NEW.data_json::jsonb;
  v_run_id text;
  prev_type text;
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
             THEN e.data_json::jsonb END
      INTO prev_type, prev_chain, prev_data
      FROM ql3.events e WHERE e.stream_id = NEW.stream_id AND e.stream_position = NEW.stream_position - 1;
    IF NOT FOUND THEN
      PERFORM ql3.refuse_history(format('%s@%s leaves a gap: there is no event at %s', NEW.stream_id, NEW.stream_position, NEW.stream_position - 1));
    END IF;
    IF NEW.event_type = 'RunCreated' THEN PERFORM ql3.refuse_history(format('%s@%s: a Run is created once', NEW.stream_id, NEW.stream_position)); END IF;
    UPDATE ql3.streams SET version = NEW.stream_position WHERE stream_id = NEW.stream_id AND version = NEW.stream_position - 1;
    IF NOT FOUND THEN PERFORM ql3.refuse_history(format('%s@%s: the stream head is not at %s', NEW.stream_id, NEW.stream_position, NEW.stream_position - 1)); END IF;
    UPDATE ql3.runs SET version = NEW.stream_position WHERE run_id = v_run_id AND version = NEW.stream_position - 1;
    IF NOT FOUND THEN PERFORM ql3.refuse_history(format('Run %s: its head is not at %s', v_run_id, NEW.stream_position - 1)); END IF;
  END IF;

  -- the five facts of a start: together, in order, one startId, each under its own event id
  v_start := coalesce(d ->> 'startId', d #>> '{barrier,startId}');
  next_type := CASE prev_type WHEN 'SecurityAuditEventRecorded' THEN 'TraceAnchorRecorded' WHEN 'TraceAnchorRecorded' THEN 'AuditReceiptIssued'
    WHEN 'AuditReceiptIssued' THEN 'StepRunStarted' WHEN 'StepRunStarted' THEN 'ToolExecutionStartBarrierCommitted' END;
  IF next_type IS NOT NULL THEN
    IF NEW.event_type <> next_type OR v_start IS DISTINCT FROM prev_data ->> 'startId' THEN
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
REVOKE ALL ON FUNCTION ql3.append_run_event() FROM PUBLIC;

CREATE TRIGGER events_append_run_event BEFORE INSERT ON ql3.events
  FOR EACH ROW EXECUTE FUNCTION ql3.append_run_event();

-- A start is whole at commit: its first fact is followed by the other four. The order check
-- above makes a stream head at or past the first fact's position + 4 imply that those four are
-- TraceAnchorRecorded, AuditReceiptIssued, StepRunStarted and the barrier event, in that order.
-- Deferred, so it runs once the transaction is complete; it reads only the Run's own stream
-- head (a probe of the event index would be a predicate lock that starts of unrelated Runs
-- share under SERIALIZABLE). A fact row without its events is refused by its foreign keys
-- (the barrier names the StepRunStarted) or reported by `verify` (evidence without its move).
CREATE FUNCTION ql3.require_whole_start() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM ql3.streams s WHERE s.stream_id = NEW.stream_id AND s.version >= NEW.stream_position + 4) THEN
    PERFORM ql3.refuse_history(format('start %s: its facts end before its StepRun move and barrier', NEW.data_json::jsonb ->> 'startId'));
  END IF;
  RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION ql3.require_whole_start() FROM PUBLIC;

CREATE CONSTRAINT TRIGGER events_whole_start AFTER INSERT ON ql3.events DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW WHEN (NEW.event_type = 'SecurityAuditEventRecorded') EXECUTE FUNCTION ql3.require_whole_start();

-- The heads are moved once per event: room on each page keeps those updates HOT (no new index
-- entries), so they neither grow the indexes nor touch index pages other writers read.
ALTER TABLE ql3.streams SET (fillfactor = 50);
ALTER TABLE ql3.runs SET (fillfactor = 50);
ALTER TABLE ql3.step_runs SET (fillfactor = 50);
