-- Directory leases are fences: an ingest or post-processing done under a
-- lease checks, in its own transaction, that the lease still has the
-- token it was granted with. The row is locked FOR SHARE, so a takeover
-- (which bumps the token) waits for that transaction or makes it fail.
-- SQLSTATE EW001 is ediwatch's "lease lost".
CREATE FUNCTION ediwatch_check_fence(p_name text, p_token bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    current bigint;
BEGIN
    SELECT token INTO current FROM lease WHERE name = p_name FOR SHARE;
    IF current IS DISTINCT FROM p_token THEN
        RAISE EXCEPTION 'lease % lost: token % is no longer current', p_name, p_token
            USING ERRCODE = 'EW001';
    END IF;
END
$$;
