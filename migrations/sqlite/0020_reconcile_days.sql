-- Reconciliation over a long window reads a rollup of each closed UTC day
-- and the live rows of the days not yet folded (package reconcile). The
-- body is reconciliation's JSON; version names its format; day is
-- YYYY-MM-DD.
CREATE TABLE reconcile_day (
    day TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    body BLOB NOT NULL,
    folded_at INTEGER NOT NULL
);

-- A rollup holds what a day enqueued; what is delivered of it is read
-- live, from the payment rows not delivered: few, whatever the history.
CREATE INDEX outbox_payment_undelivered ON outbox (created_at)
    WHERE kind = 'payment.posted' AND status <> 'delivered';
