-- The console's poll status, recent attempts by time and signed-out
-- sessions (see the postgres migration of the same number). Times are
-- microseconds since the epoch; 0 is none.
CREATE TABLE source_poll (
    source        TEXT NOT NULL,
    directory     TEXT NOT NULL,
    holder        TEXT NOT NULL,
    last_poll_at  INTEGER NOT NULL,
    last_ok_at    INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT NOT NULL DEFAULT '',
    last_error_at INTEGER NOT NULL DEFAULT 0,
    errors_day    TEXT NOT NULL,
    errors_on_day INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (source, directory)
) WITHOUT ROWID;

CREATE INDEX outbox_attempt_at ON outbox_attempt (at, outbox_id, http_status, latency_us);

CREATE TABLE console_session_revoked (
    id         TEXT PRIMARY KEY,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
