-- Delivered payloads are kept retention.payloads (default 30 days), not
-- as long as keys: a delivered or discarded row's payload is then
-- replaced by its residue (outbox.PayloadResidue: the payer, trace and
-- amount reconciliation totals, no patient data) and its attempts are
-- deleted, so a year of history holds a month of payloads. What dedupe
-- needs (keys, effect keys, hashes) stays.
ALTER TABLE outbox ADD COLUMN payload_pruned INTEGER NOT NULL DEFAULT 0;
-- The finished rows whose payload is still whole, by the time they
-- finished: a pass reads the rows due and no others.
CREATE INDEX outbox_payload_kept ON outbox (updated_at)
    WHERE status IN ('delivered', 'discarded') AND payload_pruned = 0;
