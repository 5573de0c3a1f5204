-- Delivery: ordering follows commit order; replays get a fresh age
-- budget and keep the error history; response bodies apart from errors.

ALTER TABLE outbox ADD COLUMN age_from timestamptz;
ALTER TABLE outbox ADD COLUMN error_history text NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN last_response text NOT NULL DEFAULT '';

-- Ordering is per sink and ordering key.
DROP INDEX outbox_open_by_order;
CREATE INDEX outbox_open_by_order ON outbox (sink, ordering_key, id) WHERE status IN ('pending', 'inflight');

-- A bigserial id is taken before commit, so a long transaction can commit
-- a lower id after a higher id of the same ordering key was delivered.
-- Every insert therefore first locks its sink and ordering key for the
-- rest of its transaction (a second inserter of that key waits for the
-- first to commit or roll back) and only then takes its id: ids of one
-- key are handed out in commit order, and the relay's "no earlier open
-- row of this key" rule holds for rows not yet committed too. The column
-- default goes, or every insert would take two ids.
ALTER TABLE outbox ALTER COLUMN id DROP DEFAULT;
CREATE FUNCTION ediwatch_outbox_order() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(NEW.sink || chr(31) || NEW.ordering_key, 7143201956));
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
