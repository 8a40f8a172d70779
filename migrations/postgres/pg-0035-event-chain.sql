-- R9.2: the Run stream is a hash chain. Each event row binds the chain digest of the event
-- before it in its stream, so a change to any cell of any event row (lifecycle events
-- included) changes every link after it, and `verify` re-derives the chain from the log.
--
--   chain_digest = 'sha256:' || hex(sha256(tag 0x00 previous 0x00 stream_id 0x00 position
--                  0x00 event_id 0x00 event_type 0x00 data_json 0x00 committed_at_ms))
--
-- with previous = '' for position 1. No field can hold a NUL (PostgreSQL text never does, and
-- canonical JSON escapes it), so the fields split unambiguously. The TypeScript twin is
-- projections/eventChain.ts; the SQLite backend stores the same value.
SET LOCAL ROLE ql3_owner;

CREATE FUNCTION ql3.event_chain_digest(previous text, stream_id text, stream_position bigint, event_id text, event_type text,
    data_json text, committed_at_ms bigint) RETURNS text
LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT 'sha256:' || encode(sha256(
    convert_to('qinglong/run-event-chain@v1', 'UTF8') || '\x00'::bytea || convert_to(previous, 'UTF8') || '\x00'::bytea
    || convert_to(stream_id, 'UTF8') || '\x00'::bytea || convert_to(stream_position::text, 'UTF8') || '\x00'::bytea
    || convert_to(event_id, 'UTF8') || '\x00'::bytea || convert_to(event_type, 'UTF8') || '\x00'::bytea
    || convert_to(data_json, 'UTF8') || '\x00'::bytea || convert_to(committed_at_ms::text, 'UTF8')), 'hex')
$fn$;
REVOKE ALL ON FUNCTION ql3.event_chain_digest(text, text, bigint, text, text, text, bigint) FROM PUBLIC;

ALTER TABLE ql3.events ADD COLUMN chain_digest TEXT;

-- Forward-only back-fill of a store written before the chain existed: every stream in
-- position order. The append-only trigger is lifted for this one statement of the migration
-- (the owner's explicit DISABLE, inside the migration's transaction) and put back at once.
ALTER TABLE ql3.events DISABLE TRIGGER events_append_only;
DO $fill$
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
$fill$;
ALTER TABLE ql3.events ENABLE TRIGGER events_append_only;

ALTER TABLE ql3.events ALTER COLUMN chain_digest SET NOT NULL;
