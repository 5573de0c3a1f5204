-- The outbox is keyed by effect key and sink. Before, effect keys were
-- unique and an effect routed to several sinks had its first sink's row
-- under the effect key and each further sink's under "@SINK:" and the key,
-- so which sink's row held the bare key followed the route's order: a route
-- reordered made a re-sent effect a new row for a sink that had it, and
-- the sink got it twice. Now every row holds the effect key itself, unique
-- with its sink, whatever the route's order.
--
-- The new unique index is built before the old constraint goes, so the
-- key stays unique throughout. Built without CONCURRENTLY: writers wait
-- for the build (README, Upgrading).
CREATE UNIQUE INDEX outbox_effect_key_sink ON outbox (effect_key, sink);
ALTER TABLE outbox DROP CONSTRAINT outbox_effect_key_key;

-- A further sink's row loses its "@SINK:" prefix, unless its sink also has
-- the bare key's row: a second row of one effect at one sink, which the old
-- keying made when a route's order changed (the double delivery this
-- migration ends). That row keeps its old key, and the pair is delivered at
-- most once more: the prefixed row, undelivered, is discarded, since its
-- sink has the effect's row; the bare key's row, undelivered when the
-- prefixed one was delivered, is discarded, since its sink had the effect
-- (a replay from the dead letters would post it again). The message names
-- the other row, not the key: a claim's may name a patient.
UPDATE outbox o
   SET status = 'discarded', lease_token = NULL, lease_expires_at = NULL,
       last_error = 'discarded by migration 0014: a second row of its effect at this sink, beside row ' || b.id
  FROM outbox b
 WHERE left(o.effect_key, length(o.sink) + 2) = '@' || o.sink || ':'
   AND b.effect_key = substr(o.effect_key, length(o.sink) + 3) AND b.sink = o.sink
   AND o.status <> 'delivered';
UPDATE outbox o
   SET status = 'discarded', lease_token = NULL, lease_expires_at = NULL,
       last_error = 'discarded by migration 0014: its effect was delivered at this sink by row ' || p.id
  FROM outbox p
 WHERE p.effect_key = '@' || o.sink || ':' || o.effect_key AND p.sink = o.sink
   AND p.status = 'delivered' AND o.status <> 'delivered';
UPDATE outbox o
   SET effect_key = substr(o.effect_key, length(o.sink) + 3)
 WHERE left(o.effect_key, length(o.sink) + 2) = '@' || o.sink || ':'
   AND NOT EXISTS (SELECT 1 FROM outbox b
                    WHERE b.effect_key = substr(o.effect_key, length(o.sink) + 3) AND b.sink = o.sink);

-- outbox_effect_lock holds a row per effect key, whatever its sinks: the
-- lock two ingests of one key take before either looks for a row of the
-- key holding other content. The outbox's unique key, (effect_key, sink),
-- makes two inserts of one key wait for each other only at a common sink:
-- without this, two replicas whose routes share no sink (per-source routes,
-- or a route being changed replica by replica) could each find no row of a
-- payment key and post it with two contents. Each claim function upserts
-- its effects' keys here, in key order, first; a second ingest of a key
-- then waits for the first to end and sees its rows. Row locks live in the
-- rows (a large file's tens of thousands hold no shared memory, as
-- advisory locks would); rows not touched for the outbox's retention are
-- pruned with it (store.Prune), as outbox_order's are.
CREATE TABLE outbox_effect_lock (
    effect_key text PRIMARY KEY,
    touched_at timestamptz NOT NULL
);
CREATE INDEX outbox_effect_lock_touched_at ON outbox_effect_lock (touched_at);

-- The two claim functions insert and find an effect's row by its key and
-- sink: restated whole, as 0013 left them but for that, for the lock of
-- each effect key (outbox_effect_lock), and for a guard
-- (ediwatch_refuse_sink_prefix): a replica of a build from before, calling
-- them with the same arguments, fails when it names a further sink's row
-- by its old "@SINK:" key, and works as before for every other row, which
-- it keys as this build does.

-- ediwatch_refuse_sink_prefix fails when one of p_keys has the "@SINK:"
-- prefix by which a build from before 0014 names an effect at a further
-- sink of its route: such a replica is stopped rather than give that sink
-- a second row of the effect. The message names no key: a claim's may
-- name a patient.
CREATE FUNCTION ediwatch_refuse_sink_prefix(p_keys text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(p_keys) AS k(key) WHERE left(k.key, 1) = '@') THEN
        RAISE EXCEPTION 'an effect key with a sink prefix: the outbox is keyed by effect key and sink since migration 0014; stop every older replica'
            USING ERRCODE = 'feature_not_supported';
    END IF;
END;
$$;

-- ediwatch_claim_set claims one transaction set's envelope key and, when
-- newly claimed and processed, inserts its outbox rows; all in the caller's
-- transaction. Unique constraints decide every race: a concurrent claimer
-- of the same key waits for the first to commit and then sees its row.
--
-- Existing key: a processing arrival reclaims a rejected row whatever its
-- hash (a rejection is not processing); otherwise the same hash is a
-- duplicate, a rejected arrival of a rejected key with another hash
-- re-records the rejection, and anything else is a key conflict.
--
-- Effects come as parallel arrays, one element per effect (kinds, keys,
-- ordering keys, sinks, packed payloads, hashes), so no payload passes
-- through jsonb; p_key_sans_isa13 is the key less its ISA13
-- (inbox.key_sans_isa13), p_clean whether the set is clean (inbox.clean).
-- An effect new at its sink is inserted; an existing row of its key and
-- sink with the same effect_hash (or a legacy row without one) is a
-- business duplicate there; a row of its key at any sink with another
-- effect_hash makes it an effect conflict, recorded as a sighting, and
-- inserted at no sink.
--
-- Returns the outcome (processed, duplicate, business_duplicate, conflict,
-- rejected), the correlation id of the original claim (or of the first
-- conflicting effect), the effect keys inserted and the effect keys in
-- conflict (an effect inserted at two sinks is named twice, one in
-- conflict at both once).
CREATE OR REPLACE FUNCTION ediwatch_claim_set(
    p_key text, p_hash text, p_type text, p_status text, p_reason text, p_summary jsonb,
    p_source text, p_path text, p_file_sha256 text, p_correlation text, p_now timestamptz,
    p_kinds text[], p_keys text[], p_ordering_keys text[], p_sinks text[], p_payloads bytea[], p_hashes text[],
    p_key_sans_isa13 text, p_clean boolean
) RETURNS TABLE (outcome text, original_correlation_id text, inserted text[], conflicts text[])
LANGUAGE plpgsql AS $$
DECLARE
    v_claimed text;
    v_existing inbox%ROWTYPE;
    v_inserted text[] := '{}';
    v_conflicts text[] := '{}';
    v_original text := p_correlation;
    v_n integer := COALESCE(cardinality(p_keys), 0);
    v_hash text;
    v_key text;
    v_old_corr text;
BEGIN
    PERFORM ediwatch_refuse_sink_prefix(p_keys);
    -- The effect keys' locks first, as ediwatch_claim_sets takes them
    -- before its inbox rows: one order, so the two never deadlock.
    INSERT INTO outbox_effect_lock (effect_key, touched_at)
    SELECT DISTINCT k.key, p_now FROM unnest(p_keys) AS k(key) ORDER BY 1
    ON CONFLICT (effect_key) DO UPDATE SET touched_at = excluded.touched_at;
    INSERT INTO inbox (key, status, content_hash, set_type, reason, summary, source, path, file_sha256,
                       correlation_id, created_at, updated_at, key_sans_isa13, clean)
    VALUES (p_key, p_status, p_hash, p_type, p_reason, p_summary, p_source, p_path, p_file_sha256,
            p_correlation, p_now, p_now, p_key_sans_isa13, p_clean)
    ON CONFLICT (key) DO NOTHING
    RETURNING key INTO v_claimed;

    IF v_claimed IS NULL THEN
        SELECT * INTO v_existing FROM inbox WHERE key = p_key FOR UPDATE;
        IF v_existing.status = 'rejected' AND p_status = 'processed'
           OR v_existing.status = 'rejected' AND p_status = 'rejected' AND v_existing.content_hash <> p_hash THEN
            -- A rejection is not processing: the next arrival that
            -- processes claims the key, whatever its content hash.
            UPDATE inbox SET status = p_status, content_hash = p_hash, set_type = p_type, reason = p_reason,
                   summary = p_summary, source = p_source, path = p_path, file_sha256 = p_file_sha256,
                   correlation_id = p_correlation, created_at = p_now, updated_at = p_now, clean = p_clean
             WHERE key = p_key;
        ELSIF v_existing.content_hash = p_hash THEN
            INSERT INTO sighting (kind, key, content_hash, source, path, file_sha256, correlation_id,
                                  original_correlation_id, created_at)
            VALUES ('duplicate', p_key, p_hash, p_source, p_path, p_file_sha256, p_correlation,
                    v_existing.correlation_id, p_now);
            RETURN QUERY SELECT 'duplicate'::text, v_existing.correlation_id, v_inserted, v_conflicts;
            RETURN;
        ELSE
            INSERT INTO sighting (kind, key, content_hash, source, path, file_sha256, correlation_id,
                                  original_correlation_id, created_at)
            VALUES ('conflict', p_key, p_hash, p_source, p_path, p_file_sha256, p_correlation,
                    v_existing.correlation_id, p_now);
            RETURN QUERY SELECT 'conflict'::text, v_existing.correlation_id, v_inserted, v_conflicts;
            RETURN;
        END IF;
    END IF;

    IF p_status = 'rejected' THEN
        RETURN QUERY SELECT 'rejected'::text, p_correlation, v_inserted, v_conflicts;
        RETURN;
    END IF;

    FOR i IN 1..v_n LOOP
        v_key := NULL;
        v_hash := COALESCE(p_hashes[i], '');
        -- Not at a sink that has the effect key, nor at any sink when a
        -- row of the key holds other business content: an effect
        -- conflict, which no sink gets, not even one new to the route.
        INSERT INTO outbox (effect_key, kind, sink, ordering_key, inbox_key, correlation_id, payload_packed,
                            next_attempt_at, created_at, updated_at, effect_hash)
        SELECT p_keys[i], p_kinds[i], p_sinks[i], p_ordering_keys[i], p_key,
               p_correlation, p_payloads[i], p_now, p_now, p_now, v_hash
         WHERE v_hash = '' OR NOT EXISTS (SELECT 1 FROM outbox o WHERE o.effect_key = p_keys[i]
                                             AND o.effect_hash <> '' AND o.effect_hash <> v_hash)
        ON CONFLICT (effect_key, sink) DO NOTHING
        RETURNING effect_key INTO v_key;
        IF v_key IS NOT NULL THEN
            v_inserted := v_inserted || v_key;
            CONTINUE;
        END IF;
        v_old_corr := NULL;
        SELECT o.correlation_id INTO v_old_corr FROM outbox o
         WHERE o.effect_key = p_keys[i] AND o.effect_hash <> '' AND o.effect_hash <> v_hash AND v_hash <> ''
         ORDER BY o.id LIMIT 1;
        IF v_old_corr IS NOT NULL
           AND (cardinality(v_conflicts) = 0 OR v_conflicts[cardinality(v_conflicts)] <> p_keys[i]) THEN
            -- One sighting per effect: its rows at several sinks come one
            -- after another, and the first in conflict records it.
            INSERT INTO sighting (kind, key, content_hash, source, path, file_sha256, correlation_id,
                                  original_correlation_id, created_at)
            VALUES ('effect_conflict', p_keys[i], v_hash, p_source, p_path,
                    p_file_sha256, p_correlation, v_old_corr, p_now);
            IF cardinality(v_conflicts) = 0 THEN
                v_original := v_old_corr;
            END IF;
            v_conflicts := v_conflicts || p_keys[i];
        END IF;
    END LOOP;

    IF cardinality(v_conflicts) > 0 THEN
        IF cardinality(v_inserted) = 0 THEN
            UPDATE inbox SET status = 'conflict', reason = 'effect conflict' WHERE key = p_key;
        END IF;
        RETURN QUERY SELECT 'conflict'::text, v_original, v_inserted, v_conflicts;
        RETURN;
    END IF;
    IF v_n > 0 AND cardinality(v_inserted) = 0 THEN
        INSERT INTO sighting (kind, key, content_hash, source, path, file_sha256, correlation_id, created_at)
        VALUES ('business_duplicate', p_key, p_hash, p_source, p_path, p_file_sha256, p_correlation, p_now);
        RETURN QUERY SELECT 'business_duplicate'::text, p_correlation, v_inserted, v_conflicts;
        RETURN;
    END IF;
    RETURN QUERY SELECT 'processed'::text, p_correlation, v_inserted, v_conflicts;
END;
$$;

-- ediwatch_claim_sets claims a run of consecutive sets of one file, in file
-- order, with exactly the outcomes ediwatch_claim_set would give each in
-- turn. Per set: key, content hash, type, status, reason, summary (text of
-- jsonb, or NULL), key less its ISA13, clean (p_cleans, last); per effect, in set order: the position of its set
-- (p_effect_sets, from 1) and the arrays ediwatch_claim_set takes.
--
-- The common case (no key of the run claimed and no effect key at any
-- sink, as far as this transaction sees, and none twice at a sink in the
-- run) is three set-based
-- statements: the inbox rows; the run's ordering locks, in file order; the
-- outbox rows, numbered in file order (as the ordering trigger does row by
-- row; a row given its id skips the trigger). Any other run is claimed by
-- ediwatch_claim_set, one set at a time. A key or effect key that a
-- concurrent transaction inserts and commits meanwhile fails the run with
-- a unique violation: the ingestion is rolled back and written again
-- (postgres.ingestErr), and then sees it. No savepoint: a large file's
-- transaction keeps no subtransactions.
--
-- Returns, per set by its position: the outcome, the original correlation
-- id, the effect keys inserted and those in conflict.
CREATE OR REPLACE FUNCTION ediwatch_claim_sets(
    p_keys text[], p_hashes text[], p_types text[], p_statuses text[], p_reasons text[], p_summaries text[],
    p_keys_sans_isa13 text[], p_source text, p_path text, p_file_sha256 text, p_correlation text, p_now timestamptz,
    p_effect_sets integer[], p_kinds text[], p_effect_keys text[], p_ordering_keys text[], p_sinks text[],
    p_payloads bytea[], p_effect_hashes text[], p_cleans boolean[]
) RETURNS TABLE (n integer, outcome text, original_correlation_id text, inserted text[], conflicts text[])
LANGUAGE plpgsql AS $$
DECLARE
    v_sets integer := COALESCE(cardinality(p_keys), 0);
    v_effects integer := COALESCE(cardinality(p_effect_keys), 0);
    v_first integer := 1;
    v_last integer;
    v_clear boolean;
BEGIN
    PERFORM ediwatch_refuse_sink_prefix(p_effect_keys);
    INSERT INTO outbox_effect_lock (effect_key, touched_at)
    SELECT DISTINCT e.key, p_now FROM unnest(p_effect_sets, p_effect_keys) AS e(set_n, key)
     WHERE p_statuses[e.set_n] = 'processed' ORDER BY 1
    ON CONFLICT (effect_key) DO UPDATE SET touched_at = excluded.touched_at;
    SELECT NOT EXISTS (SELECT 1 FROM unnest(p_keys) AS k(key),
                       LATERAL (SELECT 1 FROM inbox i WHERE i.key = k.key LIMIT 1) AS i)
       AND NOT EXISTS (SELECT 1 FROM unnest(p_effect_sets, p_effect_keys, p_sinks) AS e(set_n, key, sink),
                       LATERAL (SELECT 1 FROM outbox o WHERE o.effect_key = e.key LIMIT 1) AS o
                        WHERE p_statuses[e.set_n] = 'processed')
       AND (SELECT count(DISTINCT k.key) = count(*) FROM unnest(p_keys) AS k(key))
       AND (SELECT count(DISTINCT (e.key, e.sink)) = count(*) AND count(DISTINCT e.key) = count(DISTINCT (e.set_n, e.key))
              FROM unnest(p_effect_sets, p_effect_keys, p_sinks) AS e(set_n, key, sink)
             WHERE p_statuses[e.set_n] = 'processed')
      INTO v_clear;
    IF v_clear THEN
        INSERT INTO inbox (key, status, content_hash, set_type, reason, summary, source, path, file_sha256,
                           correlation_id, created_at, updated_at, key_sans_isa13, clean)
        SELECT s.key, s.status, s.hash, s.type, s.reason, s.summary::jsonb, p_source, p_path, p_file_sha256,
               p_correlation, p_now, p_now, s.sans, s.clean
          FROM unnest(p_keys, p_statuses, p_hashes, p_types, p_reasons, p_summaries, p_keys_sans_isa13, p_cleans)
               WITH ORDINALITY AS s(key, status, hash, type, reason, summary, sans, clean, i)
         ORDER BY s.i;
        INSERT INTO outbox_order (sink, ordering_key, touched_at)
        SELECT o.sink, o.ordering_key, p_now
          FROM (SELECT DISTINCT ON (e.sink, e.ordering_key) e.sink, e.ordering_key, e.i
                  FROM unnest(p_effect_sets, p_sinks, p_ordering_keys) WITH ORDINALITY AS e(set_n, sink, ordering_key, i)
                 WHERE p_statuses[e.set_n] = 'processed'
                 ORDER BY e.sink, e.ordering_key, e.i) o
         ORDER BY o.i
        ON CONFLICT (sink, ordering_key) DO UPDATE SET touched_at = excluded.touched_at;
        INSERT INTO outbox (id, effect_key, kind, sink, ordering_key, inbox_key, correlation_id, payload_packed,
                            next_attempt_at, created_at, updated_at, effect_hash)
        SELECT nextval('outbox_id_seq'), r.* FROM (
            SELECT e.key, e.kind, e.sink, e.ordering_key, p_keys[e.set_n], p_correlation, e.payload, p_now, p_now,
                   p_now, COALESCE(e.hash, '')
              FROM unnest(p_effect_sets, p_effect_keys, p_kinds, p_sinks, p_ordering_keys, p_payloads, p_effect_hashes)
                   WITH ORDINALITY AS e(set_n, key, kind, sink, ordering_key, payload, hash, i)
             WHERE p_statuses[e.set_n] = 'processed'
             ORDER BY e.i) r;
        RETURN QUERY
            SELECT s.i::integer, s.status, p_correlation, COALESCE(g.keys, '{}'), '{}'::text[]
              FROM unnest(p_statuses) WITH ORDINALITY AS s(status, i)
              LEFT JOIN (SELECT e.set_n, array_agg(e.key ORDER BY e.j) AS keys
                           FROM unnest(p_effect_sets, p_effect_keys) WITH ORDINALITY AS e(set_n, key, j)
                          GROUP BY e.set_n) g ON g.set_n = s.i AND s.status = 'processed'
             ORDER BY s.i;
        RETURN;
    END IF;
    FOR i IN 1..v_sets LOOP
        v_last := v_first - 1;
        WHILE v_last < v_effects AND p_effect_sets[v_last + 1] = i LOOP
            v_last := v_last + 1;
        END LOOP;
        RETURN QUERY
            SELECT i, c.outcome, c.original_correlation_id, c.inserted, c.conflicts
              FROM ediwatch_claim_set(p_keys[i], p_hashes[i], p_types[i],
                   p_statuses[i], p_reasons[i], p_summaries[i]::jsonb, p_source, p_path, p_file_sha256,
                   p_correlation, p_now, p_kinds[v_first:v_last], p_effect_keys[v_first:v_last],
                   p_ordering_keys[v_first:v_last], p_sinks[v_first:v_last], p_payloads[v_first:v_last],
                   p_effect_hashes[v_first:v_last], p_keys_sans_isa13[i], p_cleans[i]) AS c;
        v_first := v_last + 1;
    END LOOP;
END;
$$;
