-- The inbox key had two indexes of the same entries: the primary key (the
-- claim's equality and ON CONFLICT) and inbox_key_pattern, its
-- text_pattern_ops twin (the byte-order range of a TA1's lookup, whatever
-- the database's collation). One unique text_pattern_ops index serves
-- both: its equality is text equality, and ON CONFLICT (key) infers it.
CREATE UNIQUE INDEX inbox_key ON inbox (key text_pattern_ops);
ALTER TABLE inbox DROP CONSTRAINT inbox_pkey;
ALTER TABLE inbox ALTER COLUMN key SET NOT NULL;
ALTER TABLE inbox REPLICA IDENTITY USING INDEX inbox_key;
DROP INDEX inbox_key_pattern;

-- A 999's lookup of the set it answers is an equality on the key less its
-- ISA13, never a range: a hash index holds a four-byte code an entry
-- instead of the whole key (WAL-logged and crash-safe since PostgreSQL 10).
DROP INDEX inbox_key_sans_isa13;
CREATE INDEX inbox_key_sans_isa13 ON inbox USING hash (key_sans_isa13) WHERE key_sans_isa13 IS NOT NULL;
