package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

// ReconcileCounts implements store.Reconciler.
func (s *Store) ReconcileCounts(ctx context.Context, since, stuckBefore time.Time) (store.Facts, error) {
	var f store.Facts
	rows, err := s.pool.Query(ctx, `SELECT source, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), status, count(*)
		FROM remote_file WHERE updated_at >= $1 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`, since)
	if err != nil {
		return f, err
	}
	f.Files, err = store.CollectRows(rows, rows.Close, func(r store.Rows) (store.FileDay, error) {
		var d store.FileDay
		err := r.Scan(&d.Source, &d.Day, &d.Status, &d.Files)
		return d, err
	})
	if err != nil {
		return f, err
	}
	err = s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM outbox WHERE status IN ('pending', 'inflight') AND created_at < $1),
		(`+outbox.DeadCountSQL("''")+`)`, stuckBefore).Scan(&f.Stuck, &f.Dead)
	if err != nil {
		return f, err
	}
	f.Conflicts, err = s.conflictsSince(ctx, since)
	return f, err
}

// PaymentFacts implements store.Reconciler.
func (s *Store) PaymentFacts(ctx context.Context, from, to time.Time, each func(store.PaymentFact) error) error {
	return s.streamFacts(ctx, reconcilePaymentsSQL, from, to, each)
}

// UndeliveredPayments implements store.Reconciler.
func (s *Store) UndeliveredPayments(ctx context.Context, from, to time.Time, each func(store.PaymentFact) error) error {
	return s.streamFacts(ctx, undeliveredPaymentsSQL, from, to, each)
}

// streamFacts streams the payment facts q reads over [from, to) to each,
// in a read-only transaction without JIT compilation: a probe of the
// effect key index per row makes the planner's estimate of a day's read
// high enough to compile it, which took longer than the read (0.8 s of
// 1.2 s at 3,000 files a day).
func (s *Store) streamFacts(ctx context.Context, q string, from, to time.Time, each func(store.PaymentFact) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SET LOCAL jit = off`); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, q, from, to)
	if err != nil {
		return err
	}
	if err := store.StreamRows(rows, rows.Close, scanPaymentFact, each); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// PaymentsEnqueuedBefore implements store.Reconciler: one probe of the
// outbox's effect key index per key, as a scalar subquery (an array
// compared with ANY, or an EXISTS, may be planned as a join against a scan
// of the outbox).
func (s *Store) PaymentsEnqueuedBefore(ctx context.Context, keys []string, before time.Time) (map[string]bool, error) {
	found := map[string]bool{}
	if len(keys) == 0 {
		return found, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT k FROM unnest($1::text[]) k
		WHERE (SELECT true FROM outbox WHERE effect_key = k AND kind = 'payment.posted' AND created_at < $2 LIMIT 1)`,
		keys, before)
	if err != nil {
		return nil, err
	}
	err = store.StreamRows(rows, rows.Close, func(r store.Rows) (string, error) {
		var k string
		return k, r.Scan(&k)
	}, func(k string) error { found[k] = true; return nil })
	return found, err
}

// ReconcileDays implements store.Reconciler.
func (s *Store) ReconcileDays(ctx context.Context, from, to time.Time) ([]store.ReconcileDay, error) {
	rows, err := s.pool.Query(ctx, `SELECT day, version, body, folded_at FROM reconcile_day
		WHERE day >= $1 AND day < $2 ORDER BY day`, store.DayStart(from), store.DayStart(to))
	if err != nil {
		return nil, err
	}
	return store.CollectRows(rows, rows.Close, func(r store.Rows) (store.ReconcileDay, error) {
		var d store.ReconcileDay
		var day time.Time
		err := r.Scan(&day, &d.Version, &d.Body, &d.FoldedAt)
		d.Day = time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, time.UTC)
		d.FoldedAt = d.FoldedAt.UTC()
		return d, err
	})
}

// PutReconcileDay implements store.Reconciler: a rollup of an older
// format than the one stored (a replica not yet upgraded) is not stored.
func (s *Store) PutReconcileDay(ctx context.Context, d store.ReconcileDay) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO reconcile_day (day, version, body, folded_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (day) DO UPDATE SET version = excluded.version, body = excluded.body, folded_at = excluded.folded_at
		WHERE reconcile_day.version <= excluded.version`,
		store.DayStart(d.Day), d.Version, d.Body, d.FoldedAt)
	return err
}

// paymentRowsSQL selects the payment rows with what store.PaymentFact
// needs of each, as reconcilePaymentsSQL's second part: the payer and
// amount of the set that enqueued each (joined on the inbox's unique key
// index, migration 0021), the row's payload only where that set has none
// (a day's reconciliation reads no payload), and whether the payment has
// a row created before $1: a probe of the effect key index, as a scalar
// subquery (an EXISTS may be planned as a hash of every earlier payment).
const paymentRowsSQL = `SELECT x.k, 1 AS src, NULL AS inbox_key, NULL::jsonb AS summary, o.sink, o.status,
		i.summary->>'payer_id' AS payer, i.summary->>'amount' AS amount,
		CASE WHEN i.summary->>'payer_id' IS NULL OR i.summary->>'amount' IS NULL THEN ` +
	`coalesce(o.payload_packed, convert_to(o.payload_json::text, 'UTF8')) END AS payload,
		(SELECT true FROM outbox b WHERE b.effect_key IN (x.k, o.effect_key) AND b.kind = 'payment.posted'
		 AND b.created_at < $1 LIMIT 1) IS NOT NULL AS before, o.created_at AS t, o.id
	FROM outbox o CROSS JOIN LATERAL (SELECT CASE WHEN left(o.effect_key, length(o.sink) + 2) = '@' || o.sink || ':'
		THEN substr(o.effect_key, length(o.sink) + 3) ELSE o.effect_key END AS k) x
		LEFT JOIN inbox i ON i.key = o.inbox_key
	WHERE o.kind = 'payment.posted'`

// reconcilePaymentsSQL reads the summaries of the processed 835 sets and
// the payment rows created in [$1, $2), in store.PaymentFact's order (a
// summary's Before is false: the few keys parsed with no row in the
// window are looked up after, PaymentsEnqueuedBefore):
// sorted by the database (spilling to disk past work_mem), so that
// reconciliation of a quarter holds one key's rows at a time.
const reconcilePaymentsSQL = `SELECT k, src, inbox_key, summary, sink, status, payer, amount, payload, before FROM (
	SELECT 'payment:' || (summary->>'payer_id') || ':' || coalesce(summary->>'trace_number', '') AS k, 0 AS src,
		key AS inbox_key, summary, NULL AS sink, NULL AS status, NULL AS payer, NULL AS amount, NULL::bytea AS payload,
		false AS before, created_at AS t, 0::bigint AS id
	FROM inbox WHERE set_type = '835' AND status = 'processed' AND created_at >= $1 AND created_at < $2
		AND summary->>'payer_id' <> ''
	UNION ALL
	` + paymentRowsSQL + ` AND o.created_at >= $1 AND o.created_at < $2) f
	ORDER BY k COLLATE "C", src, t, id`

// undeliveredPaymentsSQL reads the payment rows created in [$1, $2) that
// are not delivered, from the partial index of them (migration 0022),
// less those whose sink has a delivered row of the payment (a pair that
// migration 0014 kept, one of them discarded).
const undeliveredPaymentsSQL = `SELECT k, src, inbox_key, summary, sink, status, payer, amount, payload, before FROM (
	` + paymentRowsSQL + ` AND o.status <> 'delivered' AND o.created_at >= $1 AND o.created_at < $2
		AND (SELECT true FROM outbox d WHERE d.effect_key IN (x.k, '@' || o.sink || ':' || x.k)
		     AND d.sink = o.sink AND d.status = 'delivered' LIMIT 1) IS NULL) f`

// scanPaymentFact scans a row of reconcilePaymentsSQL or undeliveredPaymentsSQL.
func scanPaymentFact(r store.Rows) (store.PaymentFact, error) {
	var pf store.PaymentFact
	var src int
	var inboxKey, sink, status, payer, amount *string
	var summary, payload []byte
	if err := r.Scan(&pf.Key, &src, &inboxKey, &summary, &sink, &status, &payer, &amount, &payload,
		&pf.Before); err != nil {
		return pf, err
	}
	if src == 0 {
		pf.Parsed = &store.ParsedPayment{Key: *inboxKey, Summary: summary}
		return pf, nil
	}
	e := &store.EnqueuedPayment{EffectKey: pf.Key, Sink: *sink, Status: *status}
	pf.Enqueued = e
	if payload != nil {
		var err error
		e.PayerID, e.Amount, err = store.PaymentTotals(payload)
		return pf, err
	}
	// A row has a payload (outbox_payload_set): with none read, its set's
	// summary gave both.
	if payer != nil && amount != nil {
		e.PayerID, e.Amount = *payer, *amount
	}
	return pf, nil
}

// conflictsSince returns the key and effect conflicts recorded since.
func (s *Store) conflictsSince(ctx context.Context, since time.Time) ([]store.ConflictSighting, error) {
	rows, err := s.pool.Query(ctx, `SELECT kind, key, source, path, correlation_id, original_correlation_id,
		created_at FROM sighting WHERE kind IN ('conflict', 'effect_conflict') AND created_at >= $1
		ORDER BY created_at, id`, since)
	if err != nil {
		return nil, err
	}
	return store.CollectRows(rows, rows.Close, func(r store.Rows) (store.ConflictSighting, error) {
		var c store.ConflictSighting
		err := r.Scan(&c.Kind, &c.Key, &c.Source, &c.Path, &c.CorrelationID, &c.OriginalCorrelationID, &c.At)
		c.At = c.At.UTC()
		return c, err
	})
}
