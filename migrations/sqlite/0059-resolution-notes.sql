-- R10.2: a person's note on an outcome, kept apart from the evidence. The outcome event binds
-- only the note's digest; the text here may be purged (set to NULL, stamped) and nothing else
-- ever changes, so every digest, and `verify`, stay intact after a purge.
CREATE TABLE IF NOT EXISTS resolution_notes (
  start_id     TEXT    NOT NULL,
  note_digest  TEXT    NOT NULL CHECK (note_digest GLOB 'sha256:*' AND length(note_digest) = 71),
  note_text    TEXT,
  purged_at_ms INTEGER,
  PRIMARY KEY (start_id, note_digest),
  CHECK ((note_text IS NULL) = (purged_at_ms IS NOT NULL))
) STRICT;

-- The only change a note may see is its purge. Re-runnable, like every step an upgrade spec may replay.
CREATE TRIGGER IF NOT EXISTS resolution_notes_purge_only BEFORE UPDATE ON resolution_notes
  WHEN NOT (OLD.note_text IS NOT NULL AND NEW.note_text IS NULL AND NEW.purged_at_ms IS NOT NULL
            AND NEW.start_id = OLD.start_id AND NEW.note_digest = OLD.note_digest)
  BEGIN SELECT RAISE(ABORT, 'a resolution note can only be purged'); END;
CREATE TRIGGER IF NOT EXISTS resolution_notes_no_delete BEFORE DELETE ON resolution_notes
  BEGIN SELECT RAISE(ABORT, 'a resolution note is purged, never deleted: its digest stays bound'); END;
