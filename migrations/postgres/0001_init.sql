-- ediwatch schema: inbox, sightings, outbox, listing ledger, leases,
-- outbound control numbers.

CREATE TABLE inbox (
    key            text PRIMARY KEY,
    status         text NOT NULL CHECK (status IN ('processed', 'rejected')),
    content_hash   text NOT NULL,
    set_type       text NOT NULL,
    reason         text NOT NULL DEFAULT '',
    summary        jsonb,
    source         text NOT NULL,
    path           text NOT NULL,
    file_sha256    text NOT NULL,
    correlation_id text NOT NULL,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL
);
CREATE INDEX inbox_created_at ON inbox (created_at);

-- Every arrival that was not a new claim: a duplicate (same key, same
-- content), a business duplicate (new key, existing effect keys) or a key
-- conflict (same key, other content: quarantined here, never dropped).
CREATE TABLE sighting (
    id             bigserial PRIMARY KEY,
    kind           text NOT NULL CHECK (kind IN ('duplicate', 'business_duplicate', 'conflict')),
    key            text NOT NULL,
    content_hash   text NOT NULL,
    source         text NOT NULL,
    path           text NOT NULL,
    file_sha256    text NOT NULL,
    correlation_id text NOT NULL,
    original_correlation_id text NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL
);
CREATE INDEX sighting_created_at ON sighting (created_at);
CREATE INDEX sighting_kind ON sighting (kind, created_at);

CREATE TABLE outbox (
    id               bigserial PRIMARY KEY,
    effect_key       text NOT NULL UNIQUE,
    kind             text NOT NULL,
    sink             text NOT NULL,
    ordering_key     text NOT NULL,
    inbox_key        text NOT NULL DEFAULT '',
    correlation_id   text NOT NULL,
    payload          jsonb NOT NULL,
    status           text NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'inflight', 'delivered', 'dead', 'discarded')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL,
    lease_token      text,
    lease_expires_at timestamptz,
    last_error       text NOT NULL DEFAULT '',
    last_status      integer NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    delivered_at     timestamptz
);
CREATE INDEX outbox_due ON outbox (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX outbox_open_by_order ON outbox (ordering_key, id) WHERE status IN ('pending', 'inflight');
CREATE INDEX outbox_inflight ON outbox (lease_expires_at) WHERE status = 'inflight';
CREATE INDEX outbox_dead ON outbox (sink, id) WHERE status = 'dead';
CREATE INDEX outbox_finished ON outbox (updated_at) WHERE status IN ('delivered', 'discarded');

CREATE TABLE remote_file (
    source       text NOT NULL,
    path         text NOT NULL,
    size         bigint NOT NULL,
    mtime        timestamptz NOT NULL,
    sha256       text NOT NULL DEFAULT '',
    status       text NOT NULL,
    attempts     integer NOT NULL DEFAULT 0,
    last_error   text NOT NULL DEFAULT '',
    sets         integer NOT NULL DEFAULT 0,
    post_done    boolean NOT NULL DEFAULT false,
    correlation_id text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (source, path)
);
CREATE INDEX remote_file_updated_at ON remote_file (updated_at);

CREATE TABLE lease (
    name       text PRIMARY KEY,
    holder     text NOT NULL,
    token      bigint NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE TABLE control_number (
    sender text PRIMARY KEY,
    next   bigint NOT NULL
);

-- ediwatch_claim_set claims one transaction set's envelope key and, when
-- newly claimed and processed, inserts its outbox rows; all in the caller's
-- transaction. Unique constraints decide every race: a concurrent claimer
-- of the same key waits for the first to commit and then sees its row.
-- Returns the outcome (processed, duplicate, business_duplicate, conflict,
-- rejected), the correlation id of the original claim, and the effect keys
-- inserted.
CREATE FUNCTION ediwatch_claim_set(
    p_key text, p_hash text, p_type text, p_status text, p_reason text, p_summary jsonb,
    p_source text, p_path text, p_file_sha256 text, p_correlation text, p_now timestamptz,
    p_effects jsonb
) RETURNS TABLE (outcome text, original_correlation_id text, inserted text[])
LANGUAGE plpgsql AS $$
DECLARE
    v_claimed text;
    v_existing inbox%ROWTYPE;
    v_inserted text[] := '{}';
    v_effect jsonb;
    v_key text;
BEGIN
    INSERT INTO inbox (key, status, content_hash, set_type, reason, summary, source, path, file_sha256,
                       correlation_id, created_at, updated_at)
    VALUES (p_key, p_status, p_hash, p_type, p_reason, p_summary, p_source, p_path, p_file_sha256,
            p_correlation, p_now, p_now)
    ON CONFLICT (key) DO NOTHING
    RETURNING key INTO v_claimed;

    IF v_claimed IS NULL THEN
        SELECT * INTO v_existing FROM inbox WHERE key = p_key FOR UPDATE;
        IF v_existing.content_hash = p_hash THEN
            INSERT INTO sighting (kind, key, content_hash, source, path, file_sha256, correlation_id,
                                  original_correlation_id, created_at)
            VALUES ('duplicate', p_key, p_hash, p_source, p_path, p_file_sha256, p_correlation,
                    v_existing.correlation_id, p_now);
            RETURN QUERY SELECT 'duplicate'::text, v_existing.correlation_id, v_inserted;
            RETURN;
        ELSIF v_existing.status = 'rejected' THEN
            -- A rejection is not processing: other content may claim the key.
            UPDATE inbox SET status = p_status, content_hash = p_hash, set_type = p_type, reason = p_reason,
                   summary = p_summary, source = p_source, path = p_path, file_sha256 = p_file_sha256,
                   correlation_id = p_correlation, updated_at = p_now
             WHERE key = p_key;
        ELSE
            INSERT INTO sighting (kind, key, content_hash, source, path, file_sha256, correlation_id,
                                  original_correlation_id, created_at)
            VALUES ('conflict', p_key, p_hash, p_source, p_path, p_file_sha256, p_correlation,
                    v_existing.correlation_id, p_now);
            RETURN QUERY SELECT 'conflict'::text, v_existing.correlation_id, v_inserted;
            RETURN;
        END IF;
    END IF;

    IF p_status = 'rejected' THEN
        RETURN QUERY SELECT 'rejected'::text, p_correlation, v_inserted;
        RETURN;
    END IF;

    FOR v_effect IN SELECT * FROM jsonb_array_elements(COALESCE(p_effects, '[]'::jsonb)) LOOP
        v_key := NULL;
        INSERT INTO outbox (effect_key, kind, sink, ordering_key, inbox_key, correlation_id, payload,
                            next_attempt_at, created_at, updated_at)
        VALUES (v_effect->>'key', v_effect->>'kind', v_effect->>'sink', v_effect->>'ordering_key', p_key,
                p_correlation, v_effect->'payload', p_now, p_now, p_now)
        ON CONFLICT (effect_key) DO NOTHING
        RETURNING effect_key INTO v_key;
        IF v_key IS NOT NULL THEN
            v_inserted := v_inserted || v_key;
        END IF;
    END LOOP;

    IF jsonb_array_length(COALESCE(p_effects, '[]'::jsonb)) > 0 AND cardinality(v_inserted) = 0 THEN
        INSERT INTO sighting (kind, key, content_hash, source, path, file_sha256, correlation_id, created_at)
        VALUES ('business_duplicate', p_key, p_hash, p_source, p_path, p_file_sha256, p_correlation, p_now);
        RETURN QUERY SELECT 'business_duplicate'::text, p_correlation, v_inserted;
        RETURN;
    END IF;
    RETURN QUERY SELECT 'processed'::text, p_correlation, v_inserted;
END;
$$;
