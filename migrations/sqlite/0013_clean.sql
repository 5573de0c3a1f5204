-- Whether the set that claimed a key was clean: its document read without
-- a single problem and, for a payment, balanced (inbox.SetRecord.Clean).
-- A set sent again with the same content hash is then not read again: its
-- 999 result is known to be a plain acceptance (inbox.ClaimLookup). Rows
-- stored before hold 0, unknown: such a set is read again, as before.
ALTER TABLE inbox ADD COLUMN clean INTEGER NOT NULL DEFAULT 0;
