-- R10.2 under R9.1: the runtime role has no UPDATE on any ql3 table (pg-0038), so purging a
-- resolution note's text (pg-0033: the one change that table allows) goes through this
-- function, owned by ql3_owner with a fixed search_path. It can purge and nothing else; the
-- table's purge-only trigger still guards every UPDATE. Returns how many rows it purged.
SET LOCAL ROLE ql3_owner;

CREATE FUNCTION ql3.purge_resolution_note(p_start_id text, p_note_digest text) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  n integer;
BEGIN
  UPDATE ql3.resolution_notes SET note_text = NULL, purged_at_ms = (extract(epoch FROM clock_timestamp()) * 1000)::bigint
   WHERE start_id = p_start_id AND note_digest = p_note_digest AND note_text IS NOT NULL;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$fn$;
REVOKE ALL ON FUNCTION ql3.purge_resolution_note(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql3.purge_resolution_note(text, text) TO ql3_runtime;
