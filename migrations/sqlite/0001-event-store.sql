-- The event store: one row per stream (its head, the compare-and-set of R3.5) and the
-- append-only event log. STRICT tables: TEXT and INTEGER only, no affinity surprises.
CREATE TABLE streams (
  stream_id   TEXT    NOT NULL PRIMARY KEY,
  stream_type TEXT    NOT NULL,
  version     INTEGER NOT NULL CHECK (version >= 1)
) STRICT;

CREATE TABLE events (
  global_position INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  stream_id       TEXT    NOT NULL REFERENCES streams (stream_id),
  stream_position INTEGER NOT NULL CHECK (stream_position >= 1),
  event_id        TEXT    NOT NULL,
  event_type      TEXT    NOT NULL,
  data_json       TEXT    NOT NULL,
  committed_at_ms INTEGER NOT NULL,
  UNIQUE (stream_id, stream_position),
  UNIQUE (event_id)
) STRICT;

-- History is never overwritten (R6.4).
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
