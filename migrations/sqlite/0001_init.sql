-- ediwatch schema (SQLite): the same tables as PostgreSQL. Times are
-- INTEGER microseconds since the Unix epoch; JSON is TEXT.

CREATE TABLE inbox (
    key            TEXT PRIMARY KEY,
    status         TEXT NOT NULL CHECK (status IN ('processed', 'rejected')),
    content_hash   TEXT NOT NULL,
    set_type       TEXT NOT NULL,
    reason         TEXT NOT NULL DEFAULT '',
    summary        TEXT,
    source         TEXT NOT NULL,
    path           TEXT NOT NULL,
    file_sha256    TEXT NOT NULL,
    correlation_id TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX inbox_created_at ON inbox (created_at);

CREATE TABLE sighting (
    id             INTEGER PRIMARY KEY,
    kind           TEXT NOT NULL CHECK (kind IN ('duplicate', 'business_duplicate', 'conflict')),
    key            TEXT NOT NULL,
    content_hash   TEXT NOT NULL,
    source         TEXT NOT NULL,
    path           TEXT NOT NULL,
    file_sha256    TEXT NOT NULL,
    correlation_id TEXT NOT NULL,
    original_correlation_id TEXT NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL
);
CREATE INDEX sighting_created_at ON sighting (created_at);
CREATE INDEX sighting_kind ON sighting (kind, created_at);

CREATE TABLE outbox (
    id               INTEGER PRIMARY KEY,
    effect_key       TEXT NOT NULL UNIQUE,
    kind             TEXT NOT NULL,
    sink             TEXT NOT NULL,
    ordering_key     TEXT NOT NULL,
    inbox_key        TEXT NOT NULL DEFAULT '',
    correlation_id   TEXT NOT NULL,
    payload          TEXT NOT NULL,
    status           TEXT NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'inflight', 'delivered', 'dead', 'discarded')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL,
    lease_token      TEXT,
    lease_expires_at INTEGER,
    last_error       TEXT NOT NULL DEFAULT '',
    last_status      INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    delivered_at     INTEGER
);
CREATE INDEX outbox_due ON outbox (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX outbox_open_by_order ON outbox (ordering_key, id) WHERE status IN ('pending', 'inflight');
CREATE INDEX outbox_inflight ON outbox (lease_expires_at) WHERE status = 'inflight';
CREATE INDEX outbox_dead ON outbox (sink, id) WHERE status = 'dead';
CREATE INDEX outbox_finished ON outbox (updated_at) WHERE status IN ('delivered', 'discarded');

CREATE TABLE remote_file (
    source       TEXT NOT NULL,
    path         TEXT NOT NULL,
    size         INTEGER NOT NULL,
    mtime        INTEGER NOT NULL,
    sha256       TEXT NOT NULL DEFAULT '',
    status       TEXT NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT NOT NULL DEFAULT '',
    sets         INTEGER NOT NULL DEFAULT 0,
    post_done    INTEGER NOT NULL DEFAULT 0,
    correlation_id TEXT NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (source, path)
) WITHOUT ROWID;
CREATE INDEX remote_file_updated_at ON remote_file (updated_at);

CREATE TABLE lease (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    token      INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE control_number (
    sender TEXT PRIMARY KEY,
    next   INTEGER NOT NULL
) WITHOUT ROWID;
