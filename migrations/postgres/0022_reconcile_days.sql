-- Reconciliation over a long window reads a rollup of each closed UTC day
-- and the live rows of the days not yet folded (package reconcile). The
-- body is reconciliation's JSON; version names its format.
CREATE TABLE reconcile_day (
    day date PRIMARY KEY,
    version integer NOT NULL,
    body bytea NOT NULL,
    folded_at timestamptz NOT NULL
);

-- A rollup holds what a day enqueued; what is delivered of it is read
-- live, from the payment rows not delivered: few, whatever the history.
-- Built without CONCURRENTLY: writers wait for the build (README,
-- Upgrading).
CREATE INDEX outbox_payment_undelivered ON outbox (created_at)
    WHERE kind = 'payment.posted' AND status <> 'delivered';
