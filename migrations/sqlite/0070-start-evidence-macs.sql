-- Keyed evidence (R9.4): when a deployment key is configured, each start barrier gets one row
-- here, written in the start's transaction: the id of the key and HMAC-SHA-256 over the
-- barrier's digests. The key itself is never stored; a reader holding the keyring recomputes
-- the MAC, so a barrier minted by anyone without the key fails every verified read. The
-- PostgreSQL twin is pg-0040-start-evidence-macs.
CREATE TABLE start_evidence_macs (
  start_id TEXT NOT NULL PRIMARY KEY REFERENCES tool_execution_start_barriers (start_id),
  key_id   TEXT NOT NULL CHECK (length(key_id) BETWEEN 1 AND 64),
  mac      TEXT NOT NULL CHECK (length(mac) = 64)
) STRICT;

CREATE TRIGGER start_evidence_macs_no_update BEFORE UPDATE ON start_evidence_macs BEGIN SELECT RAISE(ABORT, 'evidence MACs are immutable'); END;
CREATE TRIGGER start_evidence_macs_no_delete BEFORE DELETE ON start_evidence_macs BEGIN SELECT RAISE(ABORT, 'evidence MACs are immutable'); END;
