-- Indexes that keep every periodic and interactive read to live rows or a
-- time window, so its cost does not grow with a year of history.
--
-- Outbox counts per sink (gauges, overview, /sinks) and the stuck count of
-- reconciliation read the rows still to deliver and the dead ones: a
-- partial index holds them alone, so a count is an index-only scan of
-- the live rows, never of the delivered ones.
CREATE INDEX outbox_live ON outbox (sink, status, created_at) WHERE status IN ('pending', 'inflight', 'dead');
-- Reconciliation's payments of a window, by creation time.
CREATE INDEX outbox_payment_created ON outbox (created_at) WHERE kind = 'payment.posted';
-- The newest ingested or rejected file per source (silence alarms,
-- overview), read by a skip scan, one index probe per source.
CREATE INDEX remote_file_source_recorded ON remote_file (source, updated_at) WHERE status IN ('ingested', 'rejected');
-- Pruning's ledger rows of files post-processing removed: without it a
-- pass reads every row of files left in their drop (after: leave).
CREATE INDEX remote_file_post_done ON remote_file (updated_at) WHERE post_done = 1;
-- The files list filtered by status, newest first.
CREATE INDEX remote_file_status_updated ON remote_file (status, updated_at);
-- Dead rows in id order (dlq list and the console's dead-letter page).
CREATE INDEX outbox_dead_by_id ON outbox (id) WHERE status = 'dead';
-- The files list, newest first: SQLite sorts the whole ledger for
-- "ORDER BY updated_at DESC, source, path" unless an index holds that
-- order entire.
CREATE INDEX remote_file_recent ON remote_file (updated_at DESC, source, path);
