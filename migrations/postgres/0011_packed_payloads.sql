-- Outbox payloads stored packed (outbox.PackPayload: a tag byte and a
-- Snappy block), as the SQLite store keeps them. A large remittance's
-- payment payloads are hundreds of megabytes of JSON: parsing them into
-- jsonb and storing them cost the server more than the rest of an ingest;
-- packed, they are a fifth of the bytes and are stored as they come.
--
-- No table rewrite: rows stored before keep their jsonb payload; new rows
-- fill payload_packed only. Readers take payload_packed when it is set,
-- else payload (postgres.payloadCol).
ALTER TABLE outbox ADD COLUMN payload_packed bytea;
ALTER TABLE outbox ALTER COLUMN payload DROP NOT NULL;
-- Checked on every new row; rows stored before all have a payload.
ALTER TABLE outbox ADD CONSTRAINT outbox_payload_set
    CHECK (payload IS NOT NULL OR payload_packed IS NOT NULL) NOT VALID;

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
-- Effects come as parallel arrays, one element per effect (kinds, keys,
-- ordering keys, sinks, packed payloads, hashes), so no payload passes
-- through jsonb. A new effect key is inserted; an existing one with the
-- same effect_hash (or a legacy row without one) is a business duplicate;
-- with another effect_hash it is an effect conflict, recorded as a
-- sighting.
--
-- Returns the outcome (processed, duplicate, business_duplicate, conflict,
-- rejected), the correlation id of the original claim (or of the first
-- conflicting effect), the effect keys inserted and the effect keys in
-- conflict.
CREATE FUNCTION ediwatch_claim_set(
    p_key text, p_hash text, p_type text, p_status text, p_reason text, p_summary jsonb,
    p_source text, p_path text, p_file_sha256 text, p_correlation text, p_now timestamptz,
    p_kinds text[], p_keys text[], p_ordering_keys text[], p_sinks text[], p_payloads bytea[], p_hashes text[]
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

    FOR i IN 1..v_n LOOP
        v_key := NULL;
        v_hash := COALESCE(p_hashes[i], '');
        INSERT INTO outbox (effect_key, kind, sink, ordering_key, inbox_key, correlation_id, payload_packed,
                            next_attempt_at, created_at, updated_at, effect_hash)
        VALUES (p_keys[i], p_kinds[i], p_sinks[i], p_ordering_keys[i], p_key,
                p_correlation, p_payloads[i], p_now, p_now, p_now, v_hash)
        ON CONFLICT (effect_key) DO NOTHING
        RETURNING effect_key INTO v_key;
        IF v_key IS NOT NULL THEN
            v_inserted := v_inserted || v_key;
            CONTINUE;
        END IF;
        SELECT effect_hash, correlation_id INTO v_old_hash, v_old_corr FROM outbox
         WHERE effect_key = p_keys[i];
        IF v_old_hash <> '' AND v_old_hash <> v_hash THEN
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
