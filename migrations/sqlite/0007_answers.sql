-- Received 277CAs name the claim they answer by its ordering key, among
-- claim.received rows of any status (outbox_open_by_order holds open rows
-- only). The inbox's primary key serves the 999's prefix search as it is.
CREATE INDEX outbox_claim_order ON outbox (ordering_key, id) WHERE kind = 'claim.received';
