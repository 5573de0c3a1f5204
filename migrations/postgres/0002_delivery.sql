-- Delivery: ordering follows commit order; replays get a fresh age
-- budget and keep the error history; response bodies apart from errors.

ALTER TABLE outbox ADD COLUMN age_from timestamptz;
ALTER TABLE outbox ADD COLUMN error_history text NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN last_response text NOT NULL DEFAULT '';

-- Ordering is per sink and ordering key.
DROP INDEX outbox_open_by_order;
CREATE INDEX outbox_open_by_order ON outbox (ordering_key, sink, id) WHERE status IN ('pending', 'inflight');

-- A bigserial id is taken before commit, so a long transaction can commit
-- a lower id after a higher id of the same ordering key was delivered.
-- Every insert therefore first locks its sink and ordering key's row in
-- outbox_order for the rest of its transaction (a second inserter of that
-- key waits for the first to commit or roll back) and only then takes its
-- id: ids of one key are handed out in commit order, and the relay's "no
-- earlier open row of this key" rule holds for rows not yet committed
-- too. A row lock lives in the row, not in the shared lock table, so a
-- file with many thousands of keys is fine. Ids stay one global sequence,
-- so pruning outbox_order rows never reorders anything. The column default
-- goes, or every insert would take two ids.
CREATE TABLE outbox_order (
    sink         text NOT NULL,
    ordering_key text NOT NULL,
    touched_at   timestamptz NOT NULL,
    PRIMARY KEY (sink, ordering_key)
);
CREATE INDEX outbox_order_touched_at ON outbox_order (touched_at);
ALTER TABLE outbox ALTER COLUMN id DROP DEFAULT;
CREATE FUNCTION ediwatch_outbox_order() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox_order (sink, ordering_key, touched_at) VALUES (NEW.sink, NEW.ordering_key, NEW.created_at)
    ON CONFLICT (sink, ordering_key) DO UPDATE SET touched_at = excluded.touched_at;
    NEW.id := nextval(pg_get_serial_sequence('outbox', 'id'));
    RETURN NEW;
END;
$$;
CREATE TRIGGER outbox_order BEFORE INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION ediwatch_outbox_order();

-- Failures recorded before kept up to 256 bytes of the response body in
-- last_error ("HTTP 400: <body>"); move those bodies apart.
UPDATE outbox SET last_response = substring(last_error from 'HTTP [0-9]{3}: (.*)$'),
       last_error = regexp_replace(last_error, '(HTTP [0-9]{3}): .*$', '\1')
 WHERE last_error ~ 'HTTP [0-9]{3}: ';
