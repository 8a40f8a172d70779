-- Keyed evidence over the whole Run stream (R9.4). With a deployment key, every transaction
-- that appends Run events (a start, a lifecycle command, a resolution) stores one row here:
-- HMAC-SHA-256 under the key, over the stream positions from..to it appended and every cell
-- of those events but committed_at_ms (stamped by the database; the chain binds it), with the key id. One row per transaction, not per event: the row is what a
-- forger cannot make, and a range that must tile the stream leaves no event unaccounted for,
-- at one insert per transaction (a start's seal goes in the statement that writes its
-- barrier's MAC). The MAC is over what the writer itself inserts (the transaction clock is
-- known to it), not the chain link the trigger computes, so sealing costs no read-back.
--
-- Events written before the first keyed writer are legacy. That writer's first transaction
-- stores a sealed origin (run_event_seal_origins): the global position and the time sealing
-- starts from; an event before both, ahead of every sealed event of its stream, reads without
-- a seal (committed_at_ms is the transaction clock, pg-0036, so no later insert is older). A
-- store no keyed writer has touched has no origin, so an old store, keyed or not, still
-- verifies after this migration. A rotation re-seals the same origin under the new key. The
-- key itself is never stored. The SQLite twin is 0071-run-event-seals.
SET LOCAL ROLE ql3_owner;

CREATE TABLE ql3.run_event_macs (
  stream_id     TEXT NOT NULL,
  from_position BIGINT NOT NULL CHECK (from_position >= 1),
  to_position   BIGINT NOT NULL CHECK (to_position >= from_position),
  key_id        TEXT NOT NULL CHECK (length(key_id) BETWEEN 1 AND 64),
  mac           TEXT NOT NULL CHECK (length(mac) = 64),
  PRIMARY KEY (stream_id, from_position)
);

CREATE TABLE ql3.run_event_seal_origins (
  key_id               TEXT NOT NULL PRIMARY KEY CHECK (length(key_id) BETWEEN 1 AND 64),
  from_global_position BIGINT NOT NULL CHECK (from_global_position >= 1),
  from_ms              BIGINT NOT NULL,
  mac                  TEXT NOT NULL CHECK (length(mac) = 64)
);

CREATE TRIGGER run_event_macs_append_only BEFORE UPDATE OR DELETE ON ql3.run_event_macs
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('event seals are immutable');
CREATE TRIGGER run_event_macs_no_truncate BEFORE TRUNCATE ON ql3.run_event_macs
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('event seals are immutable');
CREATE TRIGGER run_event_seal_origins_append_only BEFORE UPDATE OR DELETE ON ql3.run_event_seal_origins
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('event seals are immutable');
CREATE TRIGGER run_event_seal_origins_no_truncate BEFORE TRUNCATE ON ql3.run_event_seal_origins
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('event seals are immutable');

-- The grants of the evidence they seal (pg-0040): the runtime reads and inserts, nobody else.
REVOKE ALL ON ql3.run_event_macs, ql3.run_event_seal_origins FROM PUBLIC;
GRANT SELECT, INSERT ON ql3.run_event_macs, ql3.run_event_seal_origins TO ql3_runtime;
