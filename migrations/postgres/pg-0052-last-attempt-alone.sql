-- R9.5, R5.2: a write's last attempt runs alone. Writers of different Runs never touch the same
-- rows, but under SERIALIZABLE they still meet on shared B-tree pages: SSI locks the index
-- page an equality probe reads (the event trigger's probe of the previous event, each foreign
-- key's check of its parent key), and the others' inserts land on the same pages, so two starts
-- of unrelated Runs can fail each other with 40001. On a small or young store nearly every
-- start shares those pages, and a start could lose all of its attempts that way.
--
-- ql3.start_gate is a table with no rows and no grants: only its lock is used, and only through
-- these functions (owned by ql3_owner), so no other login can take it in a mode the functions'
-- callers wait for. Every write transaction takes it in ACCESS SHARE mode as it takes the Run's
-- turn (writers never wait for each other there); the last attempt an operation has left takes
-- it in ACCESS EXCLUSIVE mode: first without queueing (NOWAIT, asked again every millisecond
-- for 20 ms) as soon as no write transaction is running, then, since under steady load one
-- always is, waiting in the queue, bounded by lock_timeout as every lock wait of a write is;
-- the writers that come after wait for it. It meets no concurrent writer, so nothing can make
-- it a serialization failure. A session that holds the gate all along (a superuser's pg_dump
-- takes ACCESS SHARE on every table) delays that attempt, and the writers queued behind its
-- request, by that bound and no more: it then takes the shared mode and runs as any other
-- attempt. So no lock an unrelated session can hold stalls the starts of other Runs beyond
-- lock_timeout, and only while a last attempt asks. It is taken after the snapshot (a function runs inside a statement), so the
-- writers that ended while it asked are concurrent with it; having committed first, they can
-- only form a dangerous structure with it if it read a row version one of them wrote, and they
-- wrote only their own Runs' rows.
--
-- The functions of pg-0037 and pg-0045 keep their signatures (their callers take the shared
-- lock through them); the last attempt calls the new overloads with p_alone true.
SET LOCAL ROLE ql3_owner;

CREATE TABLE ql3.start_gate ();
REVOKE ALL ON ql3.start_gate FROM PUBLIC;

-- The exclusive mode, waiting in the queue as long as the transaction's lock_timeout allows.
CREATE FUNCTION ql3.wait_start_gate_alone() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  LOCK TABLE ql3.start_gate IN ACCESS EXCLUSIVE MODE;
END
$fn$;
REVOKE ALL ON FUNCTION ql3.wait_start_gate_alone() FROM PUBLIC;

CREATE FUNCTION ql3.take_start_gate(p_alone boolean) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  deadline timestamptz := clock_timestamp() + interval '20 ms';
BEGIN
  IF p_alone THEN
    -- First asked for without waiting, again every millisecond: no writer waits behind that.
    LOOP
      BEGIN
        LOCK TABLE ql3.start_gate IN ACCESS EXCLUSIVE MODE NOWAIT;
        RETURN;
      EXCEPTION WHEN lock_not_available THEN
        EXIT WHEN clock_timestamp() >= deadline;
      END;
      PERFORM pg_sleep(0.001);
    END LOOP;
    -- Under steady load some writer is always running: wait in the queue, briefly (writers that
    -- come meanwhile wait behind the request, at most that long).
    BEGIN
      PERFORM ql3.wait_start_gate_alone();
      RETURN;
    EXCEPTION WHEN lock_not_available THEN
      NULL; -- held all along (pg_dump): run as any other attempt
    END;
  END IF;
  LOCK TABLE ql3.start_gate IN ACCESS SHARE MODE;
END
$fn$;
REVOKE ALL ON FUNCTION ql3.take_start_gate(boolean) FROM PUBLIC;

CREATE FUNCTION ql3.take_run_turn(p_run_id text, p_alone boolean) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  v bigint;
BEGIN
  PERFORM ql3.take_start_gate(p_alone);
  SELECT version INTO v FROM ql3.runs WHERE run_id = p_run_id FOR UPDATE NOWAIT;
  RETURN v;
END
$fn$;

CREATE OR REPLACE FUNCTION ql3.take_run_turn(p_run_id text) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT ql3.take_run_turn(p_run_id, false)
$fn$;

CREATE FUNCTION ql3.take_start_turn(p_run_id text, p_expected_version bigint, p_alone boolean) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  v bigint;
BEGIN
  PERFORM ql3.take_start_gate(p_alone);
  BEGIN
    SELECT version INTO v FROM ql3.runs WHERE run_id = p_run_id FOR UPDATE NOWAIT;
  EXCEPTION WHEN lock_not_available OR serialization_failure THEN
    RAISE EXCEPTION 'the turn of Run % is held by another writer; nothing was written', p_run_id
      USING ERRCODE = 'Q3T01', DETAIL = 'busy';
  END;
  IF v IS DISTINCT FROM p_expected_version THEN
    RAISE EXCEPTION 'Run % is at version %, not % as read; nothing was written', p_run_id, coalesce(v::text, 'none'), p_expected_version
      USING ERRCODE = 'Q3T01', DETAIL = 'moved';
  END IF;
  RETURN (extract(epoch FROM transaction_timestamp()) * 1000)::bigint;
END
$fn$;

CREATE OR REPLACE FUNCTION ql3.take_start_turn(p_run_id text, p_expected_version bigint) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT ql3.take_start_turn(p_run_id, p_expected_version, false)
$fn$;

REVOKE ALL ON FUNCTION ql3.take_run_turn(text, boolean), ql3.take_start_turn(text, bigint, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql3.take_run_turn(text, boolean), ql3.take_start_turn(text, bigint, boolean) TO ql3_runtime;
