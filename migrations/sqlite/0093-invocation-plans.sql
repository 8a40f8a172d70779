-- R12.2: the sealed invocation plan of a start (the ADR's gate 1), kept beside the evidence and
-- outside it: AES-256-GCM bytes under a key id (the key itself never reaches the file), the
-- plan digest the barrier binds, and the redacted preview operators see. The evidence binds
-- only the plan digest, so shredding a plan (its bytes and key id set to NULL, the one change a
-- row may see) leaves every digest and `verify` intact. The PostgreSQL twin is pg-0066.
CREATE TABLE IF NOT EXISTS invocation_plans (
  start_id     TEXT NOT NULL PRIMARY KEY REFERENCES tool_execution_start_barriers (start_id),
  plan_digest  TEXT NOT NULL CHECK (plan_digest GLOB 'sha256:*' AND length(plan_digest) = 71),
  key_id       TEXT,
  nonce        BLOB,
  ciphertext   BLOB,
  preview_json TEXT NOT NULL,
  CHECK ((key_id IS NULL) = (ciphertext IS NULL) AND (nonce IS NULL) = (ciphertext IS NULL))
) STRICT;

CREATE TRIGGER IF NOT EXISTS invocation_plans_shred_only BEFORE UPDATE ON invocation_plans
  WHEN NOT (OLD.ciphertext IS NOT NULL AND NEW.ciphertext IS NULL AND NEW.key_id IS NULL AND NEW.nonce IS NULL
            AND NEW.start_id = OLD.start_id AND NEW.plan_digest = OLD.plan_digest AND NEW.preview_json = OLD.preview_json)
  BEGIN SELECT RAISE(ABORT, 'an invocation plan can only be shredded'); END;
CREATE TRIGGER IF NOT EXISTS invocation_plans_no_delete BEFORE DELETE ON invocation_plans
  BEGIN SELECT RAISE(ABORT, 'an invocation plan is shredded, never deleted'); END;
