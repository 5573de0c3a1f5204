-- Re-send rules (see the postgres migration of the same number): inbox
-- status conflict, sighting kind effect_conflict, outbox effect_hash.
-- SQLite cannot alter a CHECK constraint: inbox and sighting are rebuilt.

CREATE TABLE inbox_new (
    key            TEXT PRIMARY KEY,
    status         TEXT NOT NULL CHECK (status IN ('processed', 'rejected', 'conflict')),
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
INSERT INTO inbox_new (key, status, content_hash, set_type, reason, summary, source, path, file_sha256,
                       correlation_id, created_at, updated_at)
SELECT key, status, content_hash, set_type, reason, summary, source, path, file_sha256,
       correlation_id, created_at, updated_at FROM inbox;
DROP TABLE inbox;
ALTER TABLE inbox_new RENAME TO inbox;
CREATE INDEX inbox_created_at ON inbox (created_at);

CREATE TABLE sighting_new (
    id             INTEGER PRIMARY KEY,
    kind           TEXT NOT NULL CHECK (kind IN ('duplicate', 'business_duplicate', 'conflict', 'effect_conflict')),
    key            TEXT NOT NULL,
    content_hash   TEXT NOT NULL,
    source         TEXT NOT NULL,
    path           TEXT NOT NULL,
    file_sha256    TEXT NOT NULL,
    correlation_id TEXT NOT NULL,
    original_correlation_id TEXT NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL
);
INSERT INTO sighting_new (id, kind, key, content_hash, source, path, file_sha256, correlation_id,
                          original_correlation_id, created_at)
SELECT id, kind, key, content_hash, source, path, file_sha256, correlation_id,
       original_correlation_id, created_at FROM sighting;
DROP TABLE sighting;
ALTER TABLE sighting_new RENAME TO sighting;
CREATE INDEX sighting_created_at ON sighting (created_at);
CREATE INDEX sighting_kind ON sighting (kind, created_at);

-- SHA-256 (hex) of the effect's business content; '' on older rows, which
-- are never taken for a conflict.
ALTER TABLE outbox ADD COLUMN effect_hash TEXT NOT NULL DEFAULT '';
