-- R9.2: the rows that bound nothing of their own now bind their cells, so a changed cell is a
-- difference `verify` reports (and the saga's claim read refuses). The same values as
-- pg-0042, from projections/eventChain.ts (fieldsDigest):
--
--   adapter_driver_claims.claim_digest  = fields_digest('qinglong/driver-claim@v1',
--                                         start_id, generation, kind, driver_id, at_ms, lease_until_ms)
--   resolution_notes.purge_digest       = fields_digest('qinglong/note-purge@v1',
--                                         start_id, note_digest, purged_at_ms)
--   schema_migrations.ledger_digest     = fields_digest('qinglong/migration-ledger@v1',
--                                         name, checksum, applied_at_ms)
--
-- A claim's digest is written with the claim and a purge's with the purge (the writer computes
-- it; SQLite has no sha256 of its own). The ledger's is written by the migrator after each
-- plan it applies (the migrator's insert predates this column, and this file's own row is
-- inserted after it runs). Rows written before this migration are back-filled here through
-- `ql3_fields_digest`, a function that exists on the migrator's connection only, with the
-- append-only and purge-only triggers lifted and put back inside the migration's transaction.
ALTER TABLE adapter_driver_claims ADD COLUMN claim_digest TEXT CHECK (claim_digest GLOB 'sha256:*' AND length(claim_digest) = 71);
DROP TRIGGER adapter_driver_claims_no_update;
UPDATE adapter_driver_claims SET claim_digest = ql3_fields_digest('qinglong/driver-claim@v1', start_id, generation, kind, driver_id, at_ms, lease_until_ms);
CREATE TRIGGER adapter_driver_claims_no_update BEFORE UPDATE ON adapter_driver_claims BEGIN SELECT RAISE(ABORT, 'driver claims are facts: append a new generation instead'); END;
CREATE TRIGGER adapter_driver_claims_digest_required BEFORE INSERT ON adapter_driver_claims WHEN NEW.claim_digest IS NULL
  BEGIN SELECT RAISE(ABORT, 'a driver claim binds its cells by claim_digest'); END;

ALTER TABLE resolution_notes ADD COLUMN purge_digest TEXT CHECK (purge_digest GLOB 'sha256:*' AND length(purge_digest) = 71);
DROP TRIGGER resolution_notes_purge_only;
UPDATE resolution_notes SET purge_digest = ql3_fields_digest('qinglong/note-purge@v1', start_id, note_digest, purged_at_ms) WHERE purged_at_ms IS NOT NULL;
CREATE TRIGGER resolution_notes_purge_only BEFORE UPDATE ON resolution_notes
  WHEN NOT (OLD.note_text IS NOT NULL AND NEW.note_text IS NULL AND NEW.purged_at_ms IS NOT NULL AND NEW.purge_digest IS NOT NULL
            AND NEW.start_id = OLD.start_id AND NEW.note_digest = OLD.note_digest)
  BEGIN SELECT RAISE(ABORT, 'a resolution note can only be purged'); END;

-- Filled for every row, old ones and this file's own, by the migrator at the end of this plan.
ALTER TABLE schema_migrations ADD COLUMN ledger_digest TEXT CHECK (ledger_digest GLOB 'sha256:*' AND length(ledger_digest) = 71);
