-- Keyed evidence over the whole Run stream (R9.4). With a deployment key, every transaction
-- that appends Run events (a start, a lifecycle command, a resolution) stores one row here:
-- HMAC-SHA-256 under the key, over the stream positions from..to it appended and every cell
-- of those events but committed_at_ms (stamped by the database; the chain binds it), with the key id. One row per transaction, not per event: the row is what a
-- forger cannot make, and a range that must tile the stream leaves no event unaccounted for,
-- at one insert per transaction (a start's seal is written beside its barrier's MAC). The MAC
-- is over what the writer itself inserts, not the chain link: the writer of an event knows
-- its cells before the insert, so sealing costs no read-back.
--
-- Events written before the first keyed writer are legacy. That writer's first transaction
-- stores a sealed origin (run_event_seal_origins): the global position and the time sealing
-- starts from; an event before both, ahead of every sealed event of its stream, reads without
-- a seal. A store no keyed writer has touched has no origin, so an old store, keyed or not,
-- still verifies after this migration. A rotation re-seals the same origin under the new key.
-- The key itself is never stored. The PostgreSQL twin is pg-0041-run-event-seals.
CREATE TABLE run_event_macs (
  stream_id     TEXT NOT NULL,
  from_position INTEGER NOT NULL CHECK (from_position >= 1),
  to_position   INTEGER NOT NULL CHECK (to_position >= from_position),
  key_id        TEXT NOT NULL CHECK (length(key_id) BETWEEN 1 AND 64),
  mac           TEXT NOT NULL CHECK (length(mac) = 64),
  PRIMARY KEY (stream_id, from_position)
) STRICT, WITHOUT ROWID;

CREATE TABLE run_event_seal_origins (
  key_id               TEXT NOT NULL PRIMARY KEY CHECK (length(key_id) BETWEEN 1 AND 64),
  from_global_position INTEGER NOT NULL CHECK (from_global_position >= 1),
  from_ms              INTEGER NOT NULL,
  mac                  TEXT NOT NULL CHECK (length(mac) = 64)
) STRICT;

CREATE TRIGGER run_event_macs_no_update BEFORE UPDATE ON run_event_macs BEGIN SELECT RAISE(ABORT, 'event seals are immutable'); END;
CREATE TRIGGER run_event_macs_no_delete BEFORE DELETE ON run_event_macs BEGIN SELECT RAISE(ABORT, 'event seals are immutable'); END;
CREATE TRIGGER run_event_seal_origins_no_update BEFORE UPDATE ON run_event_seal_origins BEGIN SELECT RAISE(ABORT, 'event seals are immutable'); END;
CREATE TRIGGER run_event_seal_origins_no_delete BEFORE DELETE ON run_event_seal_origins BEGIN SELECT RAISE(ABORT, 'event seals are immutable'); END;
