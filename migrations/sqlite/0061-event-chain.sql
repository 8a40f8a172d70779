-- R9.2: the Run stream is a hash chain, as on PostgreSQL (pg-0035): each event row holds
--   chain_digest = sha256(tag 0x00 previous 0x00 stream_id 0x00 position 0x00 event_id
--                  0x00 event_type 0x00 data_json 0x00 committed_at_ms)
-- with previous = '' at position 1 (projections/eventChain.ts). SQLite has no sha256, so the
-- writer supplies the link and the insert trigger (0062) checks that it is there; `verify`
-- re-derives every link from the log, so a changed cell of any event row is reported.
ALTER TABLE events ADD COLUMN chain_digest TEXT;

-- Forward-only back-fill of a store written before the chain existed, stream by stream in
-- position order. ql3_event_chain is registered by the migrator on its own connection (and
-- only there); the append-only trigger is lifted for this statement and put back at once.
CREATE TEMP TABLE chain_fill (global_position INTEGER NOT NULL PRIMARY KEY, chain_digest TEXT NOT NULL);
INSERT INTO chain_fill (global_position, chain_digest)
WITH RECURSIVE chain (global_position, stream_id, stream_position, digest) AS (
  SELECT e.global_position, e.stream_id, e.stream_position,
         ql3_event_chain('', e.stream_id, e.stream_position, e.event_id, e.event_type, e.data_json, e.committed_at_ms)
    FROM events e WHERE e.stream_position = 1
  UNION ALL
  SELECT e.global_position, e.stream_id, e.stream_position,
         ql3_event_chain(c.digest, e.stream_id, e.stream_position, e.event_id, e.event_type, e.data_json, e.committed_at_ms)
    FROM chain c JOIN events e ON e.stream_id = c.stream_id AND e.stream_position = c.stream_position + 1
)
SELECT global_position, digest FROM chain;

DROP TRIGGER events_no_update;
UPDATE events SET chain_digest = (SELECT f.chain_digest FROM chain_fill f WHERE f.global_position = events.global_position);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
DROP TABLE temp.chain_fill;
