-- Re-send rules: a rejected key is claimed again by the next arrival that
-- processes, whatever its content hash; every effect keeps a digest of its
-- business content, so the same effect key with other content is an effect
-- conflict (recorded, counted, never dropped) rather than a business
-- duplicate.

-- A set whose effects all conflict with effects already posted is kept with
-- status conflict: it posted nothing and is not a processed document.
ALTER TABLE inbox DROP CONSTRAINT inbox_status_check;
ALTER TABLE inbox ADD CONSTRAINT inbox_status_check CHECK (status IN ('processed', 'rejected', 'conflict'));

-- effect_conflict: an effect whose key exists with another effect_hash;
-- its key is the effect key, its content_hash the new effect's hash.
ALTER TABLE sighting DROP CONSTRAINT sighting_kind_check;
ALTER TABLE sighting ADD CONSTRAINT sighting_kind_check
    CHECK (kind IN ('duplicate', 'business_duplicate', 'conflict', 'effect_conflict'));

-- effect_hash: SHA-256 (hex) of the effect's business content, without
-- envelope keys and control numbers. '' on rows written before this
-- migration: such a row is never taken for a conflict.
ALTER TABLE outbox ADD COLUMN effect_hash text NOT NULL DEFAULT '';

DROP FUNCTION ediwatch_claim_set(text, text, text, text, text, jsonb, text, text, text, text, timestamptz, jsonb);

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
-- Effects: a new effect key is inserted; an existing one with the same
-- effect_hash (or a legacy row without one) is a business duplicate; with
-- another effect_hash it is an effect conflict, recorded as a sighting.
--
-- Returns the outcome (processed, duplicate, business_duplicate, conflict,
-- rejected), the correlation id of the original claim (or of the first
-- conflicting effect), the effect keys inserted and the effect keys in
-- conflict.
CREATE FUNCTION ediwatch_claim_set(
    p_key text, p_hash text, p_type text, p_status text, p_reason text, p_summary jsonb,
    p_source text, p_path text, p_file_sha256 text, p_correlation text, p_now timestamptz,
    p_effects jsonb
) RETURNS TABLE (outcome text, original_correlation_id text, inserted text[], conflicts text[])
LANGUAGE plpgsql AS $$
DECLARE
    v_claimed text;
    v_existing inbox%ROWTYPE;
    v_inserted text[] := '{}';
    v_conflicts text[] := '{}';
    v_original text := p_correlation;
    v_effect jsonb;
    v_key text;
    v_old_hash text;
    v_old_corr text;
BEGIN
    INSERT INTO inbox (key, status, content_hash, set_type, reason, summary, source, path, file_sha256,
                       correlation_id, created_at, updated_at)
    VALUES (p_key, p_status, p_hash, p_type, p_reason, p_summary, p_source, p_path, p_file_sha256,
            p_correlation, p_now, p_now)
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
                   correlation_id = p_correlation, created_at = p_now, updated_at = p_now
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

    FOR v_effect IN SELECT * FROM jsonb_array_elements(COALESCE(p_effects, '[]'::jsonb)) LOOP
        v_key := NULL;
        INSERT INTO outbox (effect_key, kind, sink, ordering_key, inbox_key, correlation_id, payload,
                            next_attempt_at, created_at, updated_at, effect_hash)
        VALUES (v_effect->>'key', v_effect->>'kind', v_effect->>'sink', v_effect->>'ordering_key', p_key,
                p_correlation, v_effect->'payload', p_now, p_now, p_now, COALESCE(v_effect->>'hash', ''))
        ON CONFLICT (effect_key) DO NOTHING
        RETURNING effect_key INTO v_key;
        IF v_key IS NOT NULL THEN
            v_inserted := v_inserted || v_key;
            CONTINUE;
        END IF;
        SELECT effect_hash, correlation_id INTO v_old_hash, v_old_corr FROM outbox
         WHERE effect_key = v_effect->>'key';
        IF v_old_hash <> '' AND v_old_hash <> COALESCE(v_effect->>'hash', '') THEN
            INSERT INTO sighting (kind, key, content_hash, source, path, file_sha256, correlation_id,
                                  original_correlation_id, created_at)
            VALUES ('effect_conflict', v_effect->>'key', COALESCE(v_effect->>'hash', ''), p_source, p_path,
                    p_file_sha256, p_correlation, v_old_corr, p_now);
            IF cardinality(v_conflicts) = 0 THEN
                v_original := v_old_corr;
            END IF;
            v_conflicts := v_conflicts || (v_effect->>'key');
        END IF;
    END LOOP;

    IF cardinality(v_conflicts) > 0 THEN
        IF cardinality(v_inserted) = 0 THEN
            UPDATE inbox SET status = 'conflict', reason = 'effect conflict' WHERE key = p_key;
        END IF;
        RETURN QUERY SELECT 'conflict'::text, v_original, v_inserted, v_conflicts;
        RETURN;
    END IF;
    IF jsonb_array_length(COALESCE(p_effects, '[]'::jsonb)) > 0 AND cardinality(v_inserted) = 0 THEN
        INSERT INTO sighting (kind, key, content_hash, source, path, file_sha256, correlation_id, created_at)
        VALUES ('business_duplicate', p_key, p_hash, p_source, p_path, p_file_sha256, p_correlation, p_now);
        RETURN QUERY SELECT 'business_duplicate'::text, p_correlation, v_inserted, v_conflicts;
        RETURN;
    END IF;
    RETURN QUERY SELECT 'processed'::text, p_correlation, v_inserted, v_conflicts;
END;
$$;
