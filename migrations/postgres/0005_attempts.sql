-- Attempt history: every delivery attempt the relay makes (a request sent,
-- or one that failed on the network or timed out) is recorded with its
-- outbox row, in the statement that records the row's transition. seq
-- counts the row's attempts across all its lives (a replay keeps them);
-- attempt is the row's attempt count in the life it was made in. Only the
-- last 50 attempts of a row are kept; they go with the row.
CREATE TABLE outbox_attempt (
    outbox_id     bigint NOT NULL REFERENCES outbox (id) ON DELETE CASCADE,
    seq           integer NOT NULL,
    attempt       integer NOT NULL,
    at            timestamptz NOT NULL,
    latency_us    bigint NOT NULL,
    http_status   integer NOT NULL,
    class         text NOT NULL,
    error         text NOT NULL,
    response_size bigint NOT NULL,
    -- A bounded excerpt of the response body; receivers echo payloads, so
    -- it may hold patient data: shown only on request.
    response      text NOT NULL,
    PRIMARY KEY (outbox_id, seq)
);

-- deaths counts a row's dead-letterings across replays: each one's
-- delivery.dead event is keyed by it.
ALTER TABLE outbox ADD COLUMN deaths integer NOT NULL DEFAULT 0;
