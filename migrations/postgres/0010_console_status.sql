-- The console on every replica: how each source directory's polls went
-- (written once per poll by the replica holding the directory lease),
-- recent delivery attempts by time (success rate and latency per sink),
-- and the session cookies signed out before they expire.
CREATE TABLE source_poll (
    source        text NOT NULL,
    directory     text NOT NULL,
    holder        text NOT NULL,
    last_poll_at  timestamptz NOT NULL,
    last_ok_at    timestamptz,
    last_error    text NOT NULL DEFAULT '',
    last_error_at timestamptz,
    -- errors_on_day counts the failed polls of errors_day (UTC), the day
    -- of the last poll.
    errors_day    text NOT NULL,
    errors_on_day integer NOT NULL DEFAULT 0,
    PRIMARY KEY (source, directory)
);

-- The last hour's attempts, with what their statistics read, without
-- visiting the rest of the history.
CREATE INDEX outbox_attempt_at ON outbox_attempt (at) INCLUDE (outbox_id, http_status, latency_us);

CREATE TABLE console_session_revoked (
    id         text PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
