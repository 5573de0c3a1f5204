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
    n    INTEGER NOT NULL CHECK (n >= 0)
);

INSERT INTO outbox_dead_count (sink, n)
SELECT sink, count(*) FROM outbox WHERE status = 'dead' GROUP BY sink;

CREATE TRIGGER outbox_dead_count_insert AFTER INSERT ON outbox
WHEN NEW.status = 'dead'
BEGIN
    INSERT OR IGNORE INTO outbox_dead_count (sink, n) VALUES (NEW.sink, 0);
    UPDATE outbox_dead_count SET n = n + 1 WHERE sink = NEW.sink;
END;

CREATE TRIGGER outbox_dead_count_update AFTER UPDATE OF status, sink ON outbox
WHEN (OLD.status = 'dead' OR NEW.status = 'dead')
     AND (OLD.status IS NOT NEW.status OR OLD.sink IS NOT NEW.sink)
BEGIN
    UPDATE outbox_dead_count SET n = n - 1 WHERE sink = OLD.sink AND OLD.status = 'dead';
    INSERT OR IGNORE INTO outbox_dead_count (sink, n) SELECT NEW.sink, 0 WHERE NEW.status = 'dead';
    UPDATE outbox_dead_count SET n = n + 1 WHERE sink = NEW.sink AND NEW.status = 'dead';
END;

CREATE TRIGGER outbox_dead_count_delete AFTER DELETE ON outbox
WHEN OLD.status = 'dead'
BEGIN
    UPDATE outbox_dead_count SET n = n - 1 WHERE sink = OLD.sink;
END;

-- Counted, the dead rows need not be in the index the counts of rows
-- still to deliver read (0016's outbox_live held them, so a year's dead
-- rows were walked past by every count): it holds pending and in-flight
-- rows alone.
CREATE INDEX outbox_open ON outbox (sink, status, created_at) WHERE status IN ('pending', 'inflight');
DROP INDEX outbox_live;
