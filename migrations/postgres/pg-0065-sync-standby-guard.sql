-- R13.3: the optional durability guard (`requireSynchronousStandby`). A start that asks for it
-- calls this function in its write transaction, before anything is written: with no
-- synchronous standby attached (pg_stat_replication: none in sync or quorum state) it raises
-- Q3S01 and the transaction rolls back, so no start is acknowledged on one node only.
--
-- pg_stat_replication shows its states only to roles with the privileges of pg_read_all_stats;
-- the runtime gets none of that. The function is owned by ql3_owner, which is made a member
-- when the migrating login may grant it (a superuser may; a CREATEROLE login without ADMIN on
-- pg_read_all_stats may not, then a superuser runs the GRANT once). Without it the states read
-- as NULL and the guard refuses every start, naming the missing grant: it fails closed.
DO $do$
BEGIN
  IF NOT pg_catalog.pg_has_role('ql3_owner', 'pg_read_all_stats', 'USAGE') THEN
    GRANT pg_read_all_stats TO ql3_owner;
  END IF;
EXCEPTION WHEN OTHERS THEN
  -- not allowed to grant, or a concurrent migrator of another database granted it first
  RAISE NOTICE 'ql3_owner is not a member of pg_read_all_stats (%): requireSynchronousStandby refuses every start until a superuser runs GRANT pg_read_all_stats TO ql3_owner', SQLERRM;
END
$do$;

SET LOCAL ROLE ql3_owner;

CREATE FUNCTION ql3.require_sync_standby() RETURNS integer
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  attached integer;
  hidden integer;
BEGIN
  SELECT count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')), count(*) FILTER (WHERE sync_state IS NULL)
    INTO attached, hidden
    FROM pg_stat_replication;
  IF attached > 0 THEN
    RETURN attached;
  END IF;
  IF hidden > 0 THEN
    RAISE EXCEPTION 'the states of the attached standbys are hidden from ql3_owner (GRANT pg_read_all_stats TO ql3_owner)'
      USING ERRCODE = 'Q3S01', DETAIL = 'hidden';
  END IF;
  RAISE EXCEPTION 'the primary has no synchronous standby attached (pg_stat_replication: none in sync or quorum state)'
    USING ERRCODE = 'Q3S01', DETAIL = 'none';
END
$fn$;
REVOKE ALL ON FUNCTION ql3.require_sync_standby() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql3.require_sync_standby() TO ql3_runtime;
