-- The number of dead rows of each sink, kept by triggers in the
-- transaction that makes a row dead, replays, discards or prunes it, so
-- the gauges, the overview and a count of the dead-letter queue read one
-- row per sink however many dead rows a year leaves.
--
-- The triggers fire only on a change into or out of dead (their WHEN
-- clauses), so a delivery, a claim or an insert of a pending row pays
-- nothing for them.
CREATE TABLE outbox_dead_count (
    sink TEXT PRIMARY KEY,
    n    BIGINT NOT NULL CHECK (n >= 0)
);

INSERT INTO outbox_dead_count (sink, n)
SELECT sink, count(*) FROM outbox WHERE status = 'dead' GROUP BY sink;

CREATE FUNCTION ediwatch_outbox_dead_count() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status = 'dead' THEN
        UPDATE outbox_dead_count SET n = n - 1 WHERE sink = OLD.sink;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.status = 'dead' THEN
        INSERT INTO outbox_dead_count (sink, n) VALUES (NEW.sink, 1)
        ON CONFLICT (sink) DO UPDATE SET n = outbox_dead_count.n + 1;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER outbox_dead_count_insert AFTER INSERT ON outbox FOR EACH ROW
    WHEN (NEW.status = 'dead') EXECUTE FUNCTION ediwatch_outbox_dead_count();
CREATE TRIGGER outbox_dead_count_update AFTER UPDATE OF status, sink ON outbox FOR EACH ROW
    WHEN ((OLD.status = 'dead' OR NEW.status = 'dead')
          AND (OLD.status IS DISTINCT FROM NEW.status OR OLD.sink IS DISTINCT FROM NEW.sink))
    EXECUTE FUNCTION ediwatch_outbox_dead_count();
CREATE TRIGGER outbox_dead_count_delete AFTER DELETE ON outbox FOR EACH ROW
    WHEN (OLD.status = 'dead') EXECUTE FUNCTION ediwatch_outbox_dead_count();

-- Counted, the dead rows need not be in the index the counts of rows
-- still to deliver read (0016's outbox_live held them, so a year's dead
-- rows were walked past by every count): it holds pending and in-flight
-- rows alone.
CREATE INDEX outbox_open ON outbox (sink, status, created_at) WHERE status IN ('pending', 'inflight');
DROP INDEX outbox_live;
