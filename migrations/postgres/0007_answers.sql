-- Received acknowledgments name what they answer (process.Originals):
-- a 999 names a set by its swapped envelope, which lacks the original
-- ISA13, so the inbox is searched by a range of keys in byte order
-- (~>=~ and ~<~), which only a text_pattern_ops index serves under a
-- non-C collation; a 277CA names a claim by its ordering key, among
-- claim.received rows of any status (outbox_open_by_order holds open
-- rows only).
CREATE INDEX inbox_key_pattern ON inbox (key text_pattern_ops);
CREATE INDEX outbox_claim_order ON outbox (ordering_key, id) WHERE kind = 'claim.received';
