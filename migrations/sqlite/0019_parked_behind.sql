-- A pending row that waits behind an open row of its sink and ordering
-- key is parked: its next attempt is 9999-12-30T00:00:00Z (253402128000000000
-- microseconds), out of the claims' walk of outbox_due, until the row
-- ahead is delivered or dead-lettered (store/sqlite behindUS). No table
-- changes: this migration marks the schema, so that a build from before
-- it, which never releases parked rows, refuses the store (checkSchema)
-- instead of leaving them parked.
UPDATE outbox SET next_attempt_at = next_attempt_at WHERE 0;
