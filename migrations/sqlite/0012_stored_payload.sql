-- Payloads are stored packed since 0011 (outbox.PackPayload), in the same
-- column. An ediwatch built before would read a packed payload as JSON
-- and deliver the bytes: the column is renamed, so such a build's every
-- statement that names it fails (loudly, delivering nothing) against a
-- database migrated past it, and builds from this one on refuse a schema
-- newer than they know (cmd/ediwatch checkSchema). It holds the payload as
-- stored: packed, or the JSON text of a row stored before 0011.
ALTER TABLE outbox RENAME COLUMN payload TO stored_payload;
