-- The outbox is keyed by effect key and sink (see the postgres migration of
-- the same number). Before, effect keys were unique and an effect routed to
-- several sinks had its first sink's row under the effect key and each
-- further sink's under "@SINK:" and the key, so which sink's row held the
-- bare key followed the route's order: a route reordered made a re-sent
-- effect a new row for a sink that had it. Now every row holds the effect
-- key itself, unique with its sink.
--
-- SQLite cannot drop a column's UNIQUE: the table is rebuilt, rows keep
-- their ids, and its indexes and trigger are made again.
CREATE TABLE outbox_new (
    id               INTEGER PRIMARY KEY,
    effect_key       TEXT NOT NULL,
    kind             TEXT NOT NULL,
    sink             TEXT NOT NULL,
    ordering_key     TEXT NOT NULL,
    inbox_key        TEXT NOT NULL DEFAULT '',
    correlation_id   TEXT NOT NULL,
    stored_payload   TEXT NOT NULL,
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
    delivered_at     INTEGER,
    age_from         INTEGER,
    error_history    TEXT NOT NULL DEFAULT '',
    last_response    TEXT NOT NULL DEFAULT '',
    effect_hash      TEXT NOT NULL DEFAULT '',
    deaths           INTEGER NOT NULL DEFAULT 0,
    UNIQUE (effect_key, sink)
);

-- A further sink's row loses its "@SINK:" prefix, unless its sink also has
-- the bare key's row: a second row of one effect at one sink, which the old
-- keying made when a route's order changed (the double delivery this
-- migration ends). That row keeps its old key, and the pair is delivered at
-- most once more: the prefixed row, undelivered, is discarded, since its
-- sink has the effect's row; the bare key's row, undelivered when the
-- prefixed one was delivered, is discarded, since its sink had the effect
-- (a replay from the dead letters would post it again). The message names
-- the other row, not the key: a claim's may name a patient.
INSERT INTO outbox_new (id, effect_key, kind, sink, ordering_key, inbox_key, correlation_id, stored_payload,
                        status, attempts, next_attempt_at, lease_token, lease_expires_at, last_error,
                        last_status, created_at, updated_at, delivered_at, age_from, error_history,
                        last_response, effect_hash, deaths)
SELECT o.id,
       CASE WHEN b.id IS NULL THEN substr(o.effect_key, length(o.sink) + 3) ELSE o.effect_key END,
       o.kind, o.sink, o.ordering_key, o.inbox_key, o.correlation_id, o.stored_payload,
       CASE WHEN b.id IS NOT NULL AND o.status <> 'delivered' THEN 'discarded' ELSE o.status END,
       o.attempts, o.next_attempt_at,
       CASE WHEN b.id IS NOT NULL AND o.status <> 'delivered' THEN NULL ELSE o.lease_token END,
       CASE WHEN b.id IS NOT NULL AND o.status <> 'delivered' THEN NULL ELSE o.lease_expires_at END,
       CASE WHEN b.id IS NOT NULL AND o.status <> 'delivered'
            THEN 'discarded by migration 0014: a second row of its effect at this sink, beside row ' || b.id
            ELSE o.last_error END,
       o.last_status, o.created_at, o.updated_at, o.delivered_at, o.age_from, o.error_history,
       o.last_response, o.effect_hash, o.deaths
  FROM outbox o
  LEFT JOIN outbox b ON b.effect_key = substr(o.effect_key, length(o.sink) + 3) AND b.sink = o.sink
 WHERE substr(o.effect_key, 1, length(o.sink) + 2) = '@' || o.sink || ':'
UNION ALL
SELECT o.id, o.effect_key, o.kind, o.sink, o.ordering_key, o.inbox_key, o.correlation_id, o.stored_payload,
       CASE WHEN p.id IS NOT NULL THEN 'discarded' ELSE o.status END,
       o.attempts, o.next_attempt_at,
       CASE WHEN p.id IS NOT NULL THEN NULL ELSE o.lease_token END,
       CASE WHEN p.id IS NOT NULL THEN NULL ELSE o.lease_expires_at END,
       CASE WHEN p.id IS NOT NULL
            THEN 'discarded by migration 0014: its effect was delivered at this sink by row ' || p.id
            ELSE o.last_error END,
       o.last_status, o.created_at, o.updated_at, o.delivered_at, o.age_from, o.error_history,
       o.last_response, o.effect_hash, o.deaths
  FROM outbox o
  LEFT JOIN outbox p ON p.effect_key = '@' || o.sink || ':' || o.effect_key AND p.sink = o.sink
                    AND p.status = 'delivered' AND o.status <> 'delivered'
 WHERE substr(o.effect_key, 1, length(o.sink) + 2) <> '@' || o.sink || ':';

DROP TABLE outbox;
ALTER TABLE outbox_new RENAME TO outbox;
CREATE INDEX outbox_due ON outbox (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX outbox_inflight ON outbox (lease_expires_at) WHERE status = 'inflight';
CREATE INDEX outbox_dead ON outbox (sink, id) WHERE status = 'dead';
CREATE INDEX outbox_finished ON outbox (updated_at) WHERE status IN ('delivered', 'discarded');
CREATE INDEX outbox_open_by_order ON outbox (ordering_key, sink, id) WHERE status IN ('pending', 'inflight');
CREATE INDEX outbox_claim_order ON outbox (ordering_key, id) WHERE kind = 'claim.received';
CREATE INDEX outbox_correlation ON outbox (correlation_id);
CREATE TRIGGER outbox_attempt_pruned AFTER DELETE ON outbox BEGIN
    DELETE FROM outbox_attempt WHERE outbox_id = OLD.id;
END;
