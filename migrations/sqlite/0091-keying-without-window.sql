-- R14.1: turning a key on leaves no window. An event used to count as legacy (read without a
-- seal) when its global position was below the seal origin and its clock not after the
-- origin's; whoever writes the file can choose both, so an event put into a position left free
-- below the origin, with an old clock, read as written before the key. Legacy is now the set
-- frozen when the origin is written: the origin also stores, under its MAC, the ranges of
-- positions below it that held no event in the keying transaction (`legacy_gaps`, JSON
-- `[[from, to], ...]`), and an event at one of them is never legacy (application/eventSeals.ts).
-- An origin stored before this binds no such list: it verifies under no key, so such a store
-- reads no event as legacy (stores of unreleased versions need no upgrade path).
--
-- And the file's own guard: a global position is the next one. An event inserted below one
-- already taken is refused (the product never chooses a position; a writer that does is
-- placing an event into the past). A writer that drops this trigger still meets the frozen set.
-- The PostgreSQL twin is pg-0063-keying-without-window.
ALTER TABLE run_event_seal_origins ADD COLUMN legacy_gaps TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(legacy_gaps) AND json_type(legacy_gaps) = 'array');

CREATE TRIGGER events_position_is_next AFTER INSERT ON events
  WHEN NEW.global_position < 1 OR NEW.global_position < (SELECT max(global_position) FROM events)
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: an event''s global position is the next one, never below one already taken (R14.1)');
END;
