-- Delivery: replays get a fresh age budget and keep the error history;
-- response bodies apart from errors. (SQLite serialises writers, so ids
-- already follow commit order.)

ALTER TABLE outbox ADD COLUMN age_from INTEGER;
ALTER TABLE outbox ADD COLUMN error_history TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN last_response TEXT NOT NULL DEFAULT '';

DROP INDEX outbox_open_by_order;
CREATE INDEX outbox_open_by_order ON outbox (sink, ordering_key, id) WHERE status IN ('pending', 'inflight');
