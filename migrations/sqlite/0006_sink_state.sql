-- Sinks disabled by a receiver's 410 Gone or by an operator (ediwatch
-- sink disable). Claim leaves a disabled sink's rows out; they stay
-- pending until the sink is enabled. A sink has a row once it was first
-- disabled; enabling keeps the row (disabled = 0). Times are unix
-- microseconds, as everywhere in this schema.
CREATE TABLE sink_state (
    sink       TEXT PRIMARY KEY,
    disabled   INTEGER NOT NULL,
    since      INTEGER NOT NULL,
    reason     TEXT NOT NULL DEFAULT '',
    changed_by TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
