-- R14.1: turning a key on leaves no window. An event used to count as legacy (read without a
-- seal) when its global position was below the seal origin and its clock not after the
-- origin's. The runtime role could choose both: a transaction opened before keying keeps its
-- old clock (transaction_timestamp()), and OVERRIDING SYSTEM VALUE put its event into a
-- position left free below the origin, so it read as written before the key.
--
-- Legacy is now the set frozen when the origin is written: the origin also stores, under its
-- MAC, the ranges of positions below it that held no committed event in the snapshot it was
-- computed in (`legacy_gaps`, JSON `[[from, to], ...]`), and an event at one of them is never
-- legacy (application/eventSeals.ts): not one a transaction straddling keying commits later,
-- nor one put there by hand. A taken position holds its event for ever (append-only, unique).
-- An origin stored before this binds no such list: it verifies under no key, so such a store
-- reads no event as legacy (stores of unreleased versions need no upgrade path).
--
-- And the runtime may no longer choose a global position at all: its INSERT right on events is
-- narrowed to the columns it writes, so `global_position` (and OVERRIDING SYSTEM VALUE) is
-- refused; every event takes the sequence's next value. The SQLite twin is 0091.
SET LOCAL ROLE ql3_owner;

ALTER TABLE ql3.run_event_seal_origins ADD COLUMN legacy_gaps TEXT NOT NULL DEFAULT '[]'
  CHECK (jsonb_typeof(legacy_gaps::jsonb) = 'array');

REVOKE INSERT ON ql3.events FROM ql3_runtime;
GRANT INSERT (stream_id, stream_position, event_id, event_type, data_json, committed_at_ms) ON ql3.events TO ql3_runtime;
