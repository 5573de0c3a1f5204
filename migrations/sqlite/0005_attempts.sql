-- Attempt history (see the postgres migration of the same number). SQLite
-- enforces no foreign keys unless asked per connection, so triggers keep
-- the history bounded to a row's last 50 attempts and delete it with its
-- row.
CREATE TABLE outbox_attempt (
    outbox_id     INTEGER NOT NULL,
    seq           INTEGER NOT NULL,
    attempt       INTEGER NOT NULL,
    at            INTEGER NOT NULL,
    latency_us    INTEGER NOT NULL,
    http_status   INTEGER NOT NULL,
    class         TEXT NOT NULL,
    error         TEXT NOT NULL,
    response_size INTEGER NOT NULL,
    response      TEXT NOT NULL,
    PRIMARY KEY (outbox_id, seq)
) WITHOUT ROWID;

CREATE TRIGGER outbox_attempt_bounded AFTER INSERT ON outbox_attempt BEGIN
    DELETE FROM outbox_attempt WHERE outbox_id = NEW.outbox_id AND seq <= NEW.seq - 50;
END;

CREATE TRIGGER outbox_attempt_pruned AFTER DELETE ON outbox BEGIN
    DELETE FROM outbox_attempt WHERE outbox_id = OLD.id;
END;

-- deaths counts a row's dead-letterings across replays: each one's
-- delivery.dead event is keyed by it.
ALTER TABLE outbox ADD COLUMN deaths INTEGER NOT NULL DEFAULT 0;
