-- ADR-0158 cluster schema (R5.2): schema ql3, its six roles, and the event store.
--
-- Roles are cluster-global: several databases of one cluster share them, so each is created
-- only if missing, and a concurrent creator (another database migrating at the same moment)
-- is tolerated. Every role is NOLOGIN: deployments grant membership to their login users.
--   ql3_owner            owns the schema and every object in it; migrations run as it
--   ql3_runtime          the start barrier's runtime: SELECT/INSERT on facts, no UPDATE/DELETE
--   ql3_admin            operators: read models only
--   ql3_reader           dashboards: read models only
--   ql3_worker_ingress   worker ingress: nothing here beyond USAGE
--   ql3_package_executor package executor: nothing here beyond USAGE
DO $roles$
DECLARE
  r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['ql3_owner', 'ql3_runtime', 'ql3_admin', 'ql3_reader', 'ql3_worker_ingress', 'ql3_package_executor'] LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r) THEN
      BEGIN
        EXECUTE format('CREATE ROLE %I NOLOGIN', r);
      EXCEPTION WHEN duplicate_object OR unique_violation THEN
        NULL; -- another database of this cluster created it first
      END;
    END IF;
  END LOOP;
  -- A non-superuser migrator (CREATEROLE) must be able to SET ROLE ql3_owner below.
  IF NOT (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user)
     AND NOT pg_catalog.pg_has_role(current_user, 'ql3_owner', 'MEMBER') THEN
    EXECUTE format('GRANT ql3_owner TO %I', current_user);
  END IF;
END
$roles$;

CREATE SCHEMA ql3 AUTHORIZATION ql3_owner;
REVOKE ALL ON SCHEMA ql3 FROM PUBLIC;
GRANT USAGE ON SCHEMA ql3 TO ql3_runtime, ql3_admin, ql3_reader, ql3_worker_ingress, ql3_package_executor;

-- Everything below is owned by ql3_owner (the role is reset after each migration).
SET LOCAL ROLE ql3_owner;

-- The migration ledger: name and checksum of each applied file, in order.
CREATE TABLE ql3.schema_migrations (
  name          TEXT   NOT NULL PRIMARY KEY,
  checksum      TEXT   NOT NULL,
  applied_at_ms BIGINT NOT NULL
);

-- History is never overwritten (R6.4): facts refuse UPDATE, DELETE and TRUNCATE for every
-- role, the owner included; only an explicit DISABLE TRIGGER by the owner gets past it.
CREATE FUNCTION ql3.refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
  RAISE EXCEPTION '% on %.% refused: % (R6.4)', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV[0]
    USING ERRCODE = 'integrity_constraint_violation';
END
$fn$;
REVOKE ALL ON FUNCTION ql3.refuse_change() FROM PUBLIC;

-- The event store: one row per stream (its head, the compare-and-set of R3.5) and the
-- append-only event log.
CREATE TABLE ql3.streams (
  stream_id   TEXT   NOT NULL PRIMARY KEY,
  stream_type TEXT   NOT NULL,
  version     BIGINT NOT NULL CHECK (version >= 1)
);

CREATE TABLE ql3.events (
  global_position BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  stream_id       TEXT   NOT NULL REFERENCES ql3.streams (stream_id),
  stream_position BIGINT NOT NULL CHECK (stream_position >= 1),
  event_id        TEXT   NOT NULL,
  event_type      TEXT   NOT NULL,
  data_json       TEXT   NOT NULL,
  committed_at_ms BIGINT NOT NULL,
  CONSTRAINT events_stream_position_key UNIQUE (stream_id, stream_position),
  CONSTRAINT events_event_id_key UNIQUE (event_id)
);

CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON ql3.events
  FOR EACH ROW EXECUTE FUNCTION ql3.refuse_change('events are append-only');
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON ql3.events
  FOR EACH STATEMENT EXECUTE FUNCTION ql3.refuse_change('events are append-only');

GRANT SELECT ON ql3.schema_migrations TO ql3_runtime, ql3_admin;
GRANT SELECT, INSERT, UPDATE ON ql3.streams TO ql3_runtime;
GRANT SELECT, INSERT ON ql3.events TO ql3_runtime;
GRANT SELECT ON ql3.streams TO ql3_admin;
