-- Keyed evidence (R9.4): when a deployment key is configured, each start barrier gets one row
-- here, written in the start's transaction: the id of the key and HMAC-SHA-256 over the
-- barrier's digests. The key itself is never stored; a reader holding the keyring recomputes
-- the MAC, so a barrier minted with INSERT rights alone fails every verified read. The SQLite
-- twin is 0070-start-evidence-macs.
SET LOCAL ROLE ql3_owner;

CREATE TABLE ql3.start_evidence_macs (
  start_id TEXT NOT NULL PRIMARY KEY REFERENCES ql3.tool_execution_start_barriers (start_id),
  key_id   TEXT NOT NULL CHECK (length(key_id) BETWEEN 1 AND 64),
  mac      TEXT NOT NULL CHECK (length(mac) = 64)
);

CREATE TRIGGER start_evidence_macs_append_only BEFORE UPDATE OR DELETE ON ql3.start_evidence_macs
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('evidence MACs are immutable');
CREATE TRIGGER start_evidence_macs_no_truncate BEFORE TRUNCATE ON ql3.start_evidence_macs
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('evidence MACs are immutable');

-- The same grants as the barrier it belongs to (R5.2): the runtime reads and inserts, nobody else.
REVOKE ALL ON ql3.start_evidence_macs FROM PUBLIC;
GRANT SELECT, INSERT ON ql3.start_evidence_macs TO ql3_runtime;
