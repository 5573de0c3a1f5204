-- A pending row that waits behind an open row of its sink and ordering
-- key is parked: its next attempt is 9999-12-30T00:00:00Z, out of the
-- claims' walk of outbox_due, until the row ahead is delivered or
-- dead-lettered (store/postgres behindSQL). No table changes: this
-- migration marks the schema, so that a build from before it, which never
-- releases parked rows, refuses the store (checkSchema) instead of
-- leaving them parked.
COMMENT ON COLUMN outbox.next_attempt_at IS
    'when the row is due; 9999-12-31: its sink is disabled; 9999-12-30: parked behind an open row of its sink and ordering key';
