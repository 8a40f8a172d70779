-- R9.2: the rows that bound nothing of their own now bind their cells, so a changed cell is a
-- difference `verify` reports (and the saga's claim read refuses):
--
--   adapter_driver_claims.claim_digest  = fields_digest('qinglong/driver-claim@v1',
--                                         start_id, generation, kind, driver_id, at_ms, lease_until_ms)
--   resolution_notes.purge_digest       = fields_digest('qinglong/note-purge@v1',
--                                         start_id, note_digest, purged_at_ms), set by the purge
--   schema_migrations.ledger_digest     = fields_digest('qinglong/migration-ledger@v1',
--                                         name, checksum, applied_at_ms), set on insert
--
-- fields_digest(tag, fields) = 'sha256:' || hex(sha256(tag 0x00 f1 0x00 ... fn)); no field holds
-- a NUL, so the split is unambiguous. The TypeScript twin is projections/eventChain.ts
-- (fieldsDigest); the SQLite twin is 0073. A claim's digest is written by the runtime with the
-- claim (an INSERT, which it may do); a purge's by the owner's purge function (the runtime has
-- no UPDATE); a ledger row's by a trigger, since the migrator's insert predates the column.
-- Rows written before this migration are back-filled here, with the append-only and
-- purge-only triggers lifted for those statements only (inside the migration's transaction).
SET LOCAL ROLE ql3_owner;

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
REVOKE ALL ON FUNCTION ql3.fields_digest(text, text[]) FROM PUBLIC;

-- Driver claims: the runtime writes the digest with each row; old rows are back-filled.
ALTER TABLE ql3.adapter_driver_claims ADD COLUMN claim_digest TEXT;
ALTER TABLE ql3.adapter_driver_claims DISABLE TRIGGER adapter_driver_claims_append_only;
UPDATE ql3.adapter_driver_claims SET claim_digest = ql3.fields_digest('qinglong/driver-claim@v1',
  ARRAY[start_id, generation::text, kind, driver_id, at_ms::text, lease_until_ms::text]);
ALTER TABLE ql3.adapter_driver_claims ENABLE TRIGGER adapter_driver_claims_append_only;
ALTER TABLE ql3.adapter_driver_claims ALTER COLUMN claim_digest SET NOT NULL;
ALTER TABLE ql3.adapter_driver_claims ADD CONSTRAINT adapter_driver_claims_digest_shape CHECK (claim_digest LIKE 'sha256:%' AND length(claim_digest) = 71);

-- Notes: a purge stamps its time and binds it; purged notes are back-filled.
ALTER TABLE ql3.resolution_notes ADD COLUMN purge_digest TEXT;
ALTER TABLE ql3.resolution_notes DISABLE TRIGGER resolution_notes_purge_only;
UPDATE ql3.resolution_notes SET purge_digest = ql3.fields_digest('qinglong/note-purge@v1', ARRAY[start_id, note_digest, purged_at_ms::text])
 WHERE purged_at_ms IS NOT NULL;
ALTER TABLE ql3.resolution_notes ENABLE TRIGGER resolution_notes_purge_only;
ALTER TABLE ql3.resolution_notes ADD CONSTRAINT resolution_notes_purge_digest CHECK ((purge_digest IS NULL) = (purged_at_ms IS NULL));

CREATE OR REPLACE FUNCTION ql3.purge_resolution_note(p_start_id text, p_note_digest text) RETURNS integer
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

-- The ledger: each row binds when it was applied; this file's own row gets it from the trigger.
ALTER TABLE ql3.schema_migrations ADD COLUMN ledger_digest TEXT;
UPDATE ql3.schema_migrations SET ledger_digest = ql3.fields_digest('qinglong/migration-ledger@v1', ARRAY[name, checksum, applied_at_ms::text]);
CREATE FUNCTION ql3.schema_migrations_digest() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  NEW.ledger_digest := ql3.fields_digest('qinglong/migration-ledger@v1', ARRAY[NEW.name, NEW.checksum, NEW.applied_at_ms::text]);
  RETURN NEW;
END
$fn$;
REVOKE ALL ON FUNCTION ql3.schema_migrations_digest() FROM PUBLIC;
CREATE TRIGGER schema_migrations_digest BEFORE INSERT ON ql3.schema_migrations
  FOR EACH ROW EXECUTE FUNCTION ql3.schema_migrations_digest();
