-- R10.2: a person's note on an outcome, kept apart from the evidence (the SQLite twin is
-- 0059-resolution-notes). The outcome event binds only the note's digest; the text here may be
-- purged (set to NULL, stamped) and nothing else ever changes, so `verify` stays green.
SET LOCAL ROLE ql3_owner;
-- Re-runnable (IF NOT EXISTS / OR REPLACE), like every step an upgrade spec may replay.

CREATE TABLE IF NOT EXISTS ql3.resolution_notes (
  start_id     TEXT   NOT NULL,
  note_digest  TEXT   NOT NULL CHECK (note_digest ~ '^sha256:[0-9a-f]{64}$'),
  note_text    TEXT,
  purged_at_ms BIGINT,
  PRIMARY KEY (start_id, note_digest),
  CHECK ((note_text IS NULL) = (purged_at_ms IS NOT NULL))
);

CREATE OR REPLACE FUNCTION ql3.resolution_notes_purge_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'a resolution note is purged, never deleted: its digest stays bound';
  END IF;
  IF NOT (OLD.note_text IS NOT NULL AND NEW.note_text IS NULL AND NEW.purged_at_ms IS NOT NULL
          AND NEW.start_id = OLD.start_id AND NEW.note_digest = OLD.note_digest) THEN
    RAISE EXCEPTION 'a resolution note can only be purged';
  END IF;
  RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS resolution_notes_purge_only ON ql3.resolution_notes;
CREATE TRIGGER resolution_notes_purge_only BEFORE UPDATE OR DELETE ON ql3.resolution_notes
  FOR EACH ROW EXECUTE FUNCTION ql3.resolution_notes_purge_only();

GRANT SELECT, INSERT, UPDATE (note_text, purged_at_ms) ON ql3.resolution_notes TO ql3_runtime;
GRANT SELECT ON ql3.resolution_notes TO ql3_admin, ql3_reader;
