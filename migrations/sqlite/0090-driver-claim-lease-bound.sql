-- R12.3 / R11.2: a driver claim's lease is bounded by its own start. Before, any claim leased
-- for up to 25 hours, so a driver that stopped answering held a 30 s start for a day; and a
-- start could be claimed again without end. Now the database refuses, whoever inserts it:
--   * a claim leasing longer than its barrier's timeout (admission.timeoutMs, read from the
--     barrier's event) plus 300 s, the grace to record the outcome
--     (application/driverClaimRules.ts, CLAIM_LEASE_GRACE_MS);
--   * a claim past generation 32 (MAX_CLAIM_GENERATIONS): such a start is left to recovery.
-- A claim naming no barrier is left to the foreign key. Rows written before are not re-read:
-- `verify` reports a lease past the bound. The PostgreSQL twin is pg-0062.
CREATE TRIGGER adapter_driver_claims_lease_bound BEFORE INSERT ON adapter_driver_claims
WHEN NEW.kind = 'claim'
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a driver claim leases for at most its barrier''s timeout plus 300 s (R12.3)')
   WHERE NEW.lease_until_ms - NEW.at_ms > (SELECT json_extract(e.data_json, '$.barrier.admission.timeoutMs') + 300000
                                             FROM events e WHERE e.event_id = 'barrier:' || NEW.start_id);
  SELECT RAISE(ABORT, 'illegal history refused: a start is claimed at most 32 times (R12.3)')
   WHERE NEW.generation > 32;
END;
