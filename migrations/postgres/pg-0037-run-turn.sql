-- R3.2 / R9.5: the Run turn is the Run head's own row lock, taken through these functions
-- (owned by ql3_owner, fixed search_path): the runtime has no UPDATE, so it cannot say
-- SELECT ... FOR UPDATE itself, and no other login can take this lock, unlike an advisory key.
-- Writers of different Runs never wait for each other.
--
-- take_run_turn is the first statement of a write transaction and does not wait (NOWAIT): a
-- SERIALIZABLE snapshot is taken when that statement starts, so a turn waited for inside the
-- transaction would see the previous holder's writes only as a serialization failure. When the
-- turn is busy the caller rolls back, waits in await_run_turn outside any transaction (bounded
-- by the lock timeout it passes), and begins again with a fresh snapshot.
SET LOCAL ROLE ql3_owner;

-- Returns the Run's version under the lock (NULL: no such Run yet), so the caller can tell
-- whether anything it read before BEGIN is still current.
CREATE FUNCTION ql3.take_run_turn(p_run_id text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  v bigint;
BEGIN
  SELECT version INTO v FROM ql3.runs WHERE run_id = p_run_id FOR UPDATE NOWAIT;
  RETURN v;
END
$fn$;

CREATE FUNCTION ql3.await_run_turn(p_run_id text, p_lock_timeout_ms integer) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  PERFORM set_config('lock_timeout', greatest(p_lock_timeout_ms, 1)::text, true);
  PERFORM 1 FROM ql3.runs WHERE run_id = p_run_id FOR UPDATE;
  RETURN FOUND;
END
$fn$;

REVOKE ALL ON FUNCTION ql3.take_run_turn(text), ql3.await_run_turn(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql3.take_run_turn(text), ql3.await_run_turn(text, integer) TO ql3_runtime;
