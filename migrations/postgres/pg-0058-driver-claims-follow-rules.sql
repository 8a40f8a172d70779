-- R11.2 / R9.1: the database refuses a driver claim row that breaks the claim rules, whoever
-- inserts it. Before, the runtime could insert any row of the right shape (pg-0034, pg-0042):
-- a claim while another driver's lease lived, a generation skipped, a release by a driver that
-- never held the generation, a time that is not the database clock, a digest over other
-- cells. The saga's claim read and `verify` read a history by these same rules
-- (application/driverClaimRules.ts); now what they would call damage is not written:
--   * every row: its claim_digest binds its cells, and its time is the transaction clock (the
--     claim's writer stamps it so, infrastructure/postgres/postgresDriverClaims.ts);
--   * a claim is the next generation of its start (1, then one past the last claim; a generation
--     already claimed is the primary key's unique violation, which a racing claimer retries), taken at or
--     after the generation before it ended (its release, or its lease running out), with a
--     lease that ends after its time and within the longest lease (25 hours);
--   * a release ends a generation claimed by the same driver, stamped once (`at_ms` is its
--     lease end).
-- What it cannot tell: a release inserted under the claiming driver's own id by someone else
-- with the runtime's rights (README, "What the key does not seal"). Rows written before are not
-- re-read: `verify` reports a bad one. The SQLite twin is 0085.
SET LOCAL ROLE ql3_owner;

CREATE FUNCTION ql3.driver_claim_follows_rules() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  prev record;
BEGIN
  IF NEW.claim_digest IS DISTINCT FROM ql3.fields_digest('qinglong/driver-claim@v1',
       ARRAY[NEW.start_id, NEW.generation::text, NEW.kind, NEW.driver_id, NEW.at_ms::text, NEW.lease_until_ms::text]) THEN
    PERFORM ql3.refuse_history(format('driver claim %s generation %s: claim_digest does not bind its cells (R9.2)', NEW.start_id, NEW.generation));
  END IF;
  IF NEW.at_ms IS DISTINCT FROM (extract(epoch FROM transaction_timestamp()) * 1000)::bigint THEN
    PERFORM ql3.refuse_history(format('driver claim %s generation %s: at_ms is not the transaction clock (R11.2)', NEW.start_id, NEW.generation));
  END IF;
  IF NEW.kind = 'claim' THEN
    SELECT c.generation, least(c.lease_until_ms, coalesce(r.at_ms, c.lease_until_ms)) AS ended INTO prev
      FROM ql3.adapter_driver_claims c
      LEFT JOIN ql3.adapter_driver_claims r ON r.start_id = c.start_id AND r.generation = c.generation AND r.kind = 'release'
     WHERE c.start_id = NEW.start_id AND c.kind = 'claim'
     ORDER BY c.generation DESC LIMIT 1;
    IF NEW.generation <= coalesce(prev.generation, 0) THEN
      -- A racer claimed this generation first: under READ COMMITTED this statement sees its
      -- commit, which the claimer's own read did not. The primary key's answer, so the claimer
      -- reads again and finds the holder (a race, never damage).
      RAISE EXCEPTION 'driver claim % generation %: that generation is claimed already', NEW.start_id, NEW.generation
        USING ERRCODE = 'unique_violation', CONSTRAINT = 'adapter_driver_claims_pkey';
    END IF;
    IF NEW.generation IS DISTINCT FROM coalesce(prev.generation, 0) + 1 THEN
      PERFORM ql3.refuse_history(format('driver claim %s generation %s: a claim takes the next generation of its start, %s (R11.2)',
        NEW.start_id, NEW.generation, coalesce(prev.generation, 0) + 1));
    END IF;
    IF prev.ended IS NOT NULL AND NEW.at_ms < prev.ended THEN
      PERFORM ql3.refuse_history(format('driver claim %s generation %s: a claim while the generation before it still holds, until %s (R11.2)',
        NEW.start_id, NEW.generation, prev.ended));
    END IF;
    IF NOT (NEW.lease_until_ms > NEW.at_ms AND NEW.lease_until_ms - NEW.at_ms <= 90000000) THEN
      PERFORM ql3.refuse_history(format('driver claim %s generation %s: a claim leases from its time, for at most 25 hours (R11.2)', NEW.start_id, NEW.generation));
    END IF;
  ELSIF NEW.at_ms IS DISTINCT FROM NEW.lease_until_ms
     OR NOT EXISTS (SELECT 1 FROM ql3.adapter_driver_claims c
                     WHERE c.start_id = NEW.start_id AND c.generation = NEW.generation AND c.kind = 'claim' AND c.driver_id = NEW.driver_id) THEN
    PERFORM ql3.refuse_history(format('driver claim %s generation %s: a release ends a generation its own driver claimed, stamped once (R11.2)', NEW.start_id, NEW.generation));
  END IF;
  RETURN NEW;
END
$fn$;
REVOKE ALL ON FUNCTION ql3.driver_claim_follows_rules() FROM PUBLIC;

CREATE TRIGGER adapter_driver_claims_follow_rules BEFORE INSERT ON ql3.adapter_driver_claims
  FOR EACH ROW EXECUTE FUNCTION ql3.driver_claim_follows_rules();
