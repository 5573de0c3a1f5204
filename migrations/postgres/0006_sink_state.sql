-- Sinks disabled by a receiver's 410 Gone or by an operator (ediwatch
-- sink disable). Claim leaves a disabled sink's rows out, on every
-- replica; they stay pending until the sink is enabled. A sink has a row
-- once it was first disabled; enabling keeps the row (disabled = false).
CREATE TABLE sink_state (
    sink       text PRIMARY KEY,
    disabled   boolean NOT NULL,
    since      timestamptz NOT NULL,
    reason     text NOT NULL DEFAULT '',
    changed_by text NOT NULL DEFAULT ''
);
