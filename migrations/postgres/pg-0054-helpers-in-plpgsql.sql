-- The event trigger's helpers (pg-0035, pg-0036) as PL/pgSQL, each the same expression. A
-- LANGUAGE sql function with a SET clause is never inlined, and called from PL/pgSQL its body
-- is parsed and planned again in every transaction: the StepRun JSON, the tagged digest and the
-- chain digest were a third of the trigger's time per start. A PL/pgSQL function keeps its
-- compiled form and its expressions' plans for the session. Signatures, volatility, STRICT,
-- owner, search_path and grants (none to any product role) are unchanged, and so is every
-- value they return (the same expressions over the same arguments).
SET LOCAL ROLE ql3_owner;

CREATE OR REPLACE FUNCTION ql3.step_run_json(st jsonb, with_last boolean) RETURNS text
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  RETURN '{' || concat_ws(',',
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
    '"version":' || (st ->> 'version')) || '}';
END
$fn$;

CREATE OR REPLACE FUNCTION ql3.tagged_digest(tag text, body text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  RETURN 'sha256:' || encode(sha256(convert_to(tag, 'UTF8') || '\x00'::bytea || convert_to(body, 'UTF8')), 'hex');
END
$fn$;

CREATE OR REPLACE FUNCTION ql3.event_chain_digest(previous text, stream_id text, stream_position bigint, event_id text, event_type text,
    data_json text, committed_at_ms bigint) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  RETURN 'sha256:' || encode(sha256(
    convert_to('qinglong/run-event-chain@v1', 'UTF8') || '\x00'::bytea || convert_to(previous, 'UTF8') || '\x00'::bytea
    || convert_to(stream_id, 'UTF8') || '\x00'::bytea || convert_to(stream_position::text, 'UTF8') || '\x00'::bytea
    || convert_to(event_id, 'UTF8') || '\x00'::bytea || convert_to(event_type, 'UTF8') || '\x00'::bytea
    || convert_to(data_json, 'UTF8') || '\x00'::bytea || convert_to(committed_at_ms::text, 'UTF8')), 'hex');
END
$fn$;
