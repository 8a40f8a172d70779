-- R3.2, R3.5, R9.5: the Run turn and the compare-and-set of a start written in one round trip.
-- A start decides on an unlocked read (the replay lookup, the Run, its stream and the StepRun in
-- one statement) and then sends one simple-protocol query that runs as one implicit
-- SERIALIZABLE transaction: this function first, then the batched write. It takes the Run
-- head's row lock without waiting, as take_run_turn does (pg-0037), and checks that the Run is
-- still at the version the decision was made on; the Run version counts every event of the
-- Run, so an unmoved Run means an unmoved StepRun and stream too.
--
-- Either failure raises Q3T01 before anything is written, so the caller can tell "another
-- writer of this Run was first" (wait for the turn or re-read, and decide again) from a failure
-- of the write itself: a busy lock (55P03), and a writer that committed between this
-- transaction's snapshot and the lock (40001 from the row lock), caught here; a Run that moved
-- before the snapshot. Returns the transaction clock (R3.10) the rows are stamped with.
SET LOCAL ROLE ql3_owner;

CREATE FUNCTION ql3.take_start_turn(p_run_id text, p_expected_version bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  v bigint;
BEGIN
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

REVOKE ALL ON FUNCTION ql3.take_start_turn(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql3.take_start_turn(text, bigint) TO ql3_runtime;
