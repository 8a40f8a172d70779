-- R9.1: the heads of a Run (its stream head and Run head) move once per statement, not once
-- per event. A start appends its five events in one statement and moved each head five times:
-- ten row updates, each a new row version, WAL and dead tuples to prune, where two carry the
-- same history. The event trigger (pg-0036, replaced here) keeps every check it made per event,
-- with one difference: it no longer moves the two heads itself, it requires each event to lie
-- past the stream head as the statement found it, and to follow an event that exists (as
-- before). With the unique (stream_id, stream_position) index, the events one statement
-- appends to a stream are therefore exactly the positions head + 1 .. head + n. An AFTER
-- STATEMENT trigger (transition table: every INSERT of the statement, the start's three CTE
-- inserts included, fires it once) then moves both heads to the last of them, each a
-- compare-and-set on the head the statement started from, and refuses anything else. The
-- StepRun head still moves per event (one StepRun event per start). Nothing changes for a
-- reader after the statement: the heads are where the per-event moves left them.
-- The runtime still has no UPDATE on any head (pg-0038); both functions are owned by ql3_owner.
SET LOCAL ROLE ql3_owner;

CREATE OR REPLACE FUNCTION ql3.append_run_event() RETURNS trigger
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
             THEN e.data_json::jsonb END
      INTO prev_type, prev_chain, prev_data
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
REVOKE ALL ON FUNCTION ql3.move_run_heads() FROM PUBLIC;

CREATE TRIGGER events_move_run_heads AFTER INSERT ON ql3.events REFERENCING NEW TABLE AS new_events
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.move_run_heads();
