-- R12.2: the sealed invocation plan of a start (the ADR's gate 1), kept beside the evidence and
-- outside it: AES-256-GCM bytes under a key id (the key itself never reaches the database), the
-- plan digest the barrier binds, and the redacted preview operators see. The evidence binds
-- only the plan digest, so shredding a plan (its bytes and key id set to NULL, the one change a
-- row may see) leaves every digest and `verify` intact. The runtime may read and insert; it
-- shreds only through ql3.shred_invocation_plan (it has no UPDATE on any ql3 table). The
-- SQLite twin is 0093.
SET LOCAL ROLE ql3_owner;

CREATE TABLE ql3.invocation_plans (
  start_id     TEXT  NOT NULL PRIMARY KEY REFERENCES ql3.tool_execution_start_barriers (start_id),
  plan_digest  TEXT  NOT NULL CHECK (plan_digest ~ '^sha256:[0-9a-f]{64}$'),
  key_id       TEXT,
  nonce        BYTEA,
  ciphertext   BYTEA,
  preview_json TEXT  NOT NULL,
  CHECK ((key_id IS NULL) = (ciphertext IS NULL) AND (nonce IS NULL) = (ciphertext IS NULL))
);

CREATE FUNCTION ql3.invocation_plans_shred_only() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  IF TG_OP <> 'UPDATE' THEN
    RAISE EXCEPTION 'an invocation plan is shredded, never deleted';
  END IF;
  IF NOT (OLD.ciphertext IS NOT NULL AND NEW.ciphertext IS NULL AND NEW.key_id IS NULL AND NEW.nonce IS NULL
          AND NEW.start_id = OLD.start_id AND NEW.plan_digest = OLD.plan_digest AND NEW.preview_json = OLD.preview_json) THEN
    RAISE EXCEPTION 'an invocation plan can only be shredded';
  END IF;
  RETURN NEW;
END
$fn$;
REVOKE ALL ON FUNCTION ql3.invocation_plans_shred_only() FROM PUBLIC;
CREATE TRIGGER invocation_plans_shred_only BEFORE UPDATE OR DELETE ON ql3.invocation_plans
  FOR EACH ROW EXECUTE FUNCTION ql3.invocation_plans_shred_only();
CREATE TRIGGER invocation_plans_no_truncate BEFORE TRUNCATE ON ql3.invocation_plans
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('an invocation plan is shredded, never deleted');

CREATE FUNCTION ql3.shred_invocation_plan(p_start_id text) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  n integer;
BEGIN
  UPDATE ql3.invocation_plans SET key_id = NULL, nonce = NULL, ciphertext = NULL
   WHERE start_id = p_start_id AND ciphertext IS NOT NULL;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$fn$;
REVOKE ALL ON FUNCTION ql3.shred_invocation_plan(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql3.shred_invocation_plan(text) TO ql3_runtime;

GRANT SELECT, INSERT ON ql3.invocation_plans TO ql3_runtime;
