-- R11.2 / R9.1: the database refuses a driver claim row that breaks the claim rules, whoever
-- inserts it. Before, claims were insert-only and bound by their digest (0060, 0073), but any
-- row of the right shape went in: a claim while another driver's lease lived, a generation
-- skipped, a release by a driver that never held the generation. The saga's claim read and
-- `verify` read a history by these same rules (application/driverClaimRules.ts); now what
-- they would call damage is not written:
--   * a claim is the next generation of its start (1, then one past the last claim), taken at or
--     after the generation before it ended (its release, or its lease running out), with a
--     lease that ends after its time and within the longest lease (25 hours);
--   * a release ends a generation claimed by the same driver, stamped once (`at_ms` is its
--     lease end) at or after that claim.
-- The claim's digest and its time against the clock are not checked here (SQLite has no
-- sha256, and the writer reads the clock in its own statement); the PostgreSQL twin,
-- pg-0058, checks both. Rows written before are not re-read: `verify` reports a bad one.
CREATE TRIGGER adapter_driver_claims_follow_rules BEFORE INSERT ON adapter_driver_claims
BEGIN
  SELECT RAISE(ABORT, 'illegal history refused: a driver claim takes the next generation of its start (R11.2)')
   WHERE NEW.kind = 'claim'
     AND NEW.generation IS NOT (SELECT coalesce(max(c.generation), 0) + 1 FROM adapter_driver_claims c WHERE c.start_id = NEW.start_id AND c.kind = 'claim');
  SELECT RAISE(ABORT, 'illegal history refused: a driver claim while the generation before it still holds (R11.2)')
   WHERE NEW.kind = 'claim'
     AND EXISTS (SELECT 1 FROM adapter_driver_claims c
                  WHERE c.start_id = NEW.start_id AND c.generation = NEW.generation - 1 AND c.kind = 'claim'
                    AND NEW.at_ms < min(c.lease_until_ms, coalesce((SELECT r.at_ms FROM adapter_driver_claims r
                                                                   WHERE r.start_id = c.start_id AND r.generation = c.generation AND r.kind = 'release'), c.lease_until_ms)));
  SELECT RAISE(ABORT, 'illegal history refused: a driver claim leases from its time, for at most 25 hours (R11.2)')
   WHERE NEW.kind = 'claim' AND NOT (NEW.lease_until_ms > NEW.at_ms AND NEW.lease_until_ms - NEW.at_ms <= 90000000);
  SELECT RAISE(ABORT, 'illegal history refused: a release ends a generation its own driver claimed, stamped once (R11.2)')
   WHERE NEW.kind = 'release'
     AND (NEW.at_ms IS NOT NEW.lease_until_ms
          OR NOT EXISTS (SELECT 1 FROM adapter_driver_claims c
                          WHERE c.start_id = NEW.start_id AND c.generation = NEW.generation AND c.kind = 'claim'
                            AND c.driver_id = NEW.driver_id AND c.at_ms <= NEW.at_ms));
END;
