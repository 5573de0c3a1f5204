-- Payloads are stored packed since 0011 (payload_packed; payload left
-- NULL). An ediwatch built before read payload alone and would deliver a
-- packed row's NULL as its payload: the column is renamed, so such a
-- build's every statement that names it fails (loudly, delivering
-- nothing) against a database migrated past it, and builds from this one
-- on refuse a schema newer than they know (cmd/ediwatch checkSchema). It
-- holds the jsonb payload of the rows stored before 0011.
ALTER TABLE outbox RENAME COLUMN payload TO payload_json;
