-- R12.3 / R11.2: a driver claim's lease is bounded by its own start. Before, any claim leased
-- for up to 25 hours, so a driver that stopped answering held a 30 s start for a day; and a
-- start could be claimed again without end. Now the database refuses, whoever inserts it:
--   * a claim leasing longer than its barrier's timeout (admission.timeoutMs, read from the
--     barrier's event) plus 300 s, the grace to record the outcome
--     (application/driverClaimRules.ts, CLAIM_LEASE_GRACE_MS);
--   * a claim past generation 32 (MAX_CLAIM_GENERATIONS): such a start is left to recovery.
-- A claim naming no barrier is left to the foreign key. Rows written before are not re-read:
-- `verify` reports a lease past the bound. The SQLite twin is 0090.
SET LOCAL ROLE ql3_owner;

CREATE FUNCTION ql3.driver_claim_lease_bound() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  timeout_ms bigint;
BEGIN
  SELECT ((e.data_json::json -> 'barrier' -> 'admission' ->> 'timeoutMs'))::bigint INTO timeout_ms
    FROM ql3.events e WHERE e.event_id = 'barrier:' || NEW.start_id;
  IF timeout_ms IS NOT NULL AND NEW.lease_until_ms - NEW.at_ms > timeout_ms + 300000 THEN
    PERFORM ql3.refuse_history(format('driver claim %s generation %s: a claim leases for at most its barrier''s timeout plus 300 s (R12.3)', NEW.start_id, NEW.generation));
  END IF;
  IF NEW.generation > 32 THEN
    PERFORM ql3.refuse_history(format('driver claim %s generation %s: a start is claimed at most 32 times (R12.3)', NEW.start_id, NEW.generation));
  END IF;
  RETURN NEW;
END
$fn$;
REVOKE ALL ON FUNCTION ql3.driver_claim_lease_bound() FROM PUBLIC;

CREATE TRIGGER adapter_driver_claims_lease_bound BEFORE INSERT ON ql3.adapter_driver_claims
  FOR EACH ROW WHEN (NEW.kind = 'claim') EXECUTE FUNCTION ql3.driver_claim_lease_bound();
