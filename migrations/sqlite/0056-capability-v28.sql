-- ADR-0158: local-control-core moves to v28 with the start barrier.
CREATE TABLE IF NOT EXISTS capabilities (
  name    TEXT    NOT NULL PRIMARY KEY,
  version INTEGER NOT NULL
) STRICT;
INSERT INTO capabilities (name, version) VALUES ('local-control-core', 28)
  ON CONFLICT (name) DO UPDATE SET version = excluded.version WHERE excluded.version > capabilities.version;
