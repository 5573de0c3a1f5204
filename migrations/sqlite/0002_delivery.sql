-- Delivery: replays get a fresh age budget and keep the error history;
-- response bodies apart from errors. (SQLite serialises writers, so ids
-- already follow commit order.)

ALTER TABLE outbox ADD COLUMN age_from INTEGER;
ALTER TABLE outbox ADD COLUMN error_history TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN last_response TEXT NOT NULL DEFAULT '';

DROP INDEX outbox_open_by_order;
CREATE INDEX outbox_open_by_order ON outbox (ordering_key, sink, id) WHERE status IN ('pending', 'inflight');

-- Failures recorded before kept up to 256 bytes of the response body in
-- last_error ("HTTP 400: <body>"); move those bodies apart.
UPDATE outbox SET last_response = substr(last_error, instr(last_error, 'HTTP ') + 10),
       last_error = substr(last_error, 1, instr(last_error, 'HTTP ') + 7)
 WHERE last_error GLOB '*HTTP [0-9][0-9][0-9]: *';
