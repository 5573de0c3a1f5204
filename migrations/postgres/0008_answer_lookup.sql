-- A received 999 names the set it answers by its swapped envelope, which
-- lacks the original ISA13 (the seventh key part). inbox_key_pattern
-- serves that as a range over every key the two parties ever exchanged,
-- read through in full for each AK2: the longer the history, the slower
-- each 999 (a 999 of thousands of AK2s over a year of keys outlasts the
-- ingest deadline). This index holds each key with its ISA13 taken out,
-- so the lookup is one equality (postgres.setKeySQL).
CREATE INDEX inbox_key_sans_isa13 ON inbox ((regexp_replace(key, '^((?:[^:]*:){6})[^:]*', '\1')));
