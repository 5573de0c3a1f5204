package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

// ReconcileCounts implements store.Reconciler.
func (s *Store) ReconcileCounts(ctx context.Context, since, stuckBefore time.Time) (store.Facts, error) {
	var f store.Facts
	rows, err := s.db.QueryContext(ctx, `SELECT source, strftime('%Y-%m-%d', created_at / 1000000, 'unixepoch'), status, count(*)
		FROM remote_file WHERE updated_at >= ? GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`, us(since))
	if err != nil {
		return f, err
	}
	f.Files, err = store.CollectRows(rows, func() { rows.Close() }, func(r store.Rows) (store.FileDay, error) {
		var d store.FileDay
		err := r.Scan(&d.Source, &d.Day, &d.Status, &d.Files)
		return d, err
	})
	if err != nil {
		return f, err
	}
	err = s.db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM outbox WHERE status IN ('pending', 'inflight') AND created_at < ?),
		(`+outbox.DeadCountSQL("''")+`)`, us(stuckBefore)).Scan(&f.Stuck, &f.Dead)
	if err != nil {
		return f, err
	}
	f.Conflicts, err = s.conflictsSince(ctx, since)
	return f, err
}

// PaymentFacts implements store.Reconciler.
func (s *Store) PaymentFacts(ctx context.Context, from, to time.Time, each func(store.PaymentFact) error) error {
	rows, err := s.db.QueryContext(ctx, reconcilePaymentsSQL, us(from), us(to))
	if err != nil {
		return err
	}
	return store.StreamRows(rows, func() { rows.Close() }, scanPaymentFact, each)
}

// UndeliveredPayments implements store.Reconciler.
func (s *Store) UndeliveredPayments(ctx context.Context, from, to time.Time, each func(store.PaymentFact) error) error {
	rows, err := s.db.QueryContext(ctx, undeliveredPaymentsSQL, us(from), us(to))
	if err != nil {
		return err
	}
	return store.StreamRows(rows, func() { rows.Close() }, scanPaymentFact, each)
}

// PaymentsEnqueuedBefore implements store.Reconciler: one probe of the
// outbox's effect key index per key.
func (s *Store) PaymentsEnqueuedBefore(ctx context.Context, keys []string, before time.Time) (map[string]bool, error) {
	found := map[string]bool{}
	if len(keys) == 0 {
		return found, nil
	}
	list, err := json.Marshal(keys)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT effect_key FROM outbox
		WHERE effect_key IN (SELECT value FROM json_each(?)) AND kind = 'payment.posted' AND created_at < ?`,
		string(list), us(before))
	if err != nil {
		return nil, err
	}
	err = store.StreamRows(rows, func() { rows.Close() }, func(r store.Rows) (string, error) {
		var k string
		return k, r.Scan(&k)
	}, func(k string) error { found[k] = true; return nil })
	return found, err
}

// ReconcileDays implements store.Reconciler.
func (s *Store) ReconcileDays(ctx context.Context, from, to time.Time) ([]store.ReconcileDay, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT day, version, body, folded_at FROM reconcile_day
		WHERE day >= ? AND day < ? ORDER BY day`, dayText(from), dayText(to))
	if err != nil {
		return nil, err
	}
	return store.CollectRows(rows, func() { rows.Close() }, func(r store.Rows) (store.ReconcileDay, error) {
		var d store.ReconcileDay
		var day string
		var at int64
		if err := r.Scan(&day, &d.Version, &d.Body, &at); err != nil {
			return d, err
		}
		d.FoldedAt = fromUS(at)
		t, err := time.Parse(time.DateOnly, day)
		d.Day = t
		return d, err
	})
}

// PutReconcileDay implements store.Reconciler: a rollup of an older
// format than the one stored (a replica not yet upgraded) is not stored.
func (s *Store) PutReconcileDay(ctx context.Context, d store.ReconcileDay) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO reconcile_day (day, version, body, folded_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (day) DO UPDATE SET version = excluded.version, body = excluded.body, folded_at = excluded.folded_at
		WHERE reconcile_day.version <= excluded.version`,
		dayText(d.Day), d.Version, d.Body, us(d.FoldedAt))
	return err
}

// dayText is t's UTC day as reconcile_day holds it.
func dayText(t time.Time) string { return store.DayStart(t).Format(time.DateOnly) }

// paymentRowsSQL selects the payment rows created in [?1, ?2) with what
// store.PaymentFact needs of each, as reconcilePaymentsSQL's second part:
// the payer and amount of the set that enqueued each, the row's payload
// only where that set has none (a day's reconciliation reads no payload),
// and whether the payment has a row created before ?1 (a probe of the
// effect key index). It ends inside its subquery r, so that a statement
// may add to its conditions.
const paymentRowsSQL = `SELECT r.k, 1 AS src, NULL AS inbox_key, NULL AS summary, r.sink, r.status, r.payer, r.amount,
		CASE WHEN r.payer IS NULL OR r.amount IS NULL THEN r.stored_payload END AS payload,
		EXISTS (SELECT 1 FROM outbox b WHERE b.effect_key IN (r.k, r.effect_key) AND b.kind = 'payment.posted'
		        AND b.created_at < ?1) AS before, r.created_at AS t, r.id
	FROM (SELECT CASE WHEN substr(o.effect_key, 1, length(o.sink) + 2) = '@' || o.sink || ':'
			THEN substr(o.effect_key, length(o.sink) + 3) ELSE o.effect_key END AS k, o.effect_key, o.sink, o.status,
			CASE WHEN json_valid(i.summary) THEN i.summary ->> '$.payer_id' END AS payer,
			CASE WHEN json_valid(i.summary) THEN i.summary ->> '$.amount' END AS amount,
			o.stored_payload, o.created_at, o.id
		FROM outbox o LEFT JOIN inbox i ON i.key = o.inbox_key
		WHERE o.kind = 'payment.posted' AND o.created_at >= ?1 AND o.created_at < ?2`

// reconcilePaymentsSQL reads the summaries of processed 835 sets and the
// payment rows created in [?1, ?2), in store.PaymentFact's order (a
// summary's Before is false: the few keys parsed with no row in the
// window are looked up after, PaymentsEnqueuedBefore): sorted
// by SQLite (in its temporary files past its cache), so that
// reconciliation of a quarter holds one key's rows at a time.
const reconcilePaymentsSQL = `SELECT k, src, inbox_key, summary, sink, status, payer, amount, payload, before FROM (
	SELECT 'payment:' || p || ':' || coalesce(tr, '') AS k, 0 AS src, key AS inbox_key, summary, NULL AS sink,
		NULL AS status, NULL AS payer, NULL AS amount, NULL AS payload, 0 AS before, created_at AS t, 0 AS id
	FROM (SELECT key, summary, created_at, CASE WHEN json_valid(summary) THEN summary ->> '$.payer_id' END AS p,
			CASE WHEN json_valid(summary) THEN summary ->> '$.trace_number' END AS tr
		FROM inbox WHERE set_type = '835' AND status = 'processed' AND created_at >= ?1 AND created_at < ?2
			AND summary IS NOT NULL)
	WHERE p <> ''
	UNION ALL
	` + paymentRowsSQL + `) r)
	ORDER BY k, src, t, id`

// undeliveredPaymentsSQL reads the payment rows created in [?1, ?2) that
// are not delivered, from the partial index of them (migration 0020),
// less those whose sink has a delivered row of the payment (a pair that
// migration 0014 kept, one of them discarded).
const undeliveredPaymentsSQL = `SELECT k, src, inbox_key, summary, sink, status, payer, amount, payload, before FROM (
	` + paymentRowsSQL + ` AND o.status <> 'delivered') r
	WHERE NOT EXISTS (SELECT 1 FROM outbox d WHERE d.effect_key IN (r.k, '@' || r.sink || ':' || r.k)
	                  AND d.sink = r.sink AND d.status = 'delivered'))`

// scanPaymentFact scans a row of reconcilePaymentsSQL or undeliveredPaymentsSQL.
func scanPaymentFact(r store.Rows) (store.PaymentFact, error) {
	var pf store.PaymentFact
	var src int
	var inboxKey, summary, sink, status, payer, amount sql.NullString
	var payload []byte
	if err := r.Scan(&pf.Key, &src, &inboxKey, &summary, &sink, &status, &payer, &amount, &payload,
		&pf.Before); err != nil {
		return pf, err
	}
	if src == 0 {
		pf.Parsed = &store.ParsedPayment{Key: inboxKey.String, Summary: json.RawMessage(summary.String)}
		return pf, nil
	}
	e := &store.EnqueuedPayment{EffectKey: pf.Key, Sink: sink.String, Status: status.String}
	pf.Enqueued = e
	if payload != nil {
		var err error
		e.PayerID, e.Amount, err = store.PaymentTotals(payload)
		return pf, err
	}
	e.PayerID, e.Amount = payer.String, amount.String
	return pf, nil
}

// conflictsSince returns the key and effect conflicts recorded since.
func (s *Store) conflictsSince(ctx context.Context, since time.Time) ([]store.ConflictSighting, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT kind, key, source, path, correlation_id, original_correlation_id,
		created_at FROM sighting WHERE kind IN ('conflict', 'effect_conflict') AND created_at >= ?
		ORDER BY created_at, id`, us(since))
	if err != nil {
		return nil, err
	}
	return store.CollectRows(rows, func() { rows.Close() }, func(r store.Rows) (store.ConflictSighting, error) {
		var c store.ConflictSighting
		var at int64
		err := r.Scan(&c.Kind, &c.Key, &c.Source, &c.Path, &c.CorrelationID, &c.OriginalCorrelationID, &at)
		c.At = fromUS(at)
		return c, err
	})
}
