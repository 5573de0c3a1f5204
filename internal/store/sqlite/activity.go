package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/ediwatch/ediwatch/internal/store"
)

var _ store.ActivityReader = (*Store)(nil)

// usPerHour is an hour in the driver's microsecond timestamps.
const usPerHour = int64(time.Hour / time.Microsecond)

// Activity implements store.ActivityReader. Both queries read an index on
// the update time (the delivered rows' partial index).
func (s *Store) Activity(ctx context.Context, since time.Time) (store.Activity, error) {
	a := store.Activity{Delivered: map[string]int{}}
	files, deliveries := map[time.Time]int{}, map[time.Time]int{}
	rows, err := s.db.QueryContext(ctx, `SELECT updated_at / ?, count(*) FROM remote_file
		WHERE updated_at >= ? AND status IN ('ingested', 'rejected') GROUP BY 1`, usPerHour, us(since))
	if err != nil {
		return a, fmt.Errorf("activity: %w", err)
	}
	for rows.Next() {
		var h int64
		var n int
		if err := rows.Scan(&h, &n); err != nil {
			rows.Close()
			return a, fmt.Errorf("activity: %w", err)
		}
		files[fromUS(h*usPerHour)] += n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return a, fmt.Errorf("activity: %w", err)
	}
	rows, err = s.db.QueryContext(ctx, `SELECT updated_at / ?, sink, count(*) FROM outbox
		WHERE status IN ('delivered', 'discarded') AND status = 'delivered' AND updated_at >= ? GROUP BY 1, 2`,
		usPerHour, us(since))
	if err != nil {
		return a, fmt.Errorf("activity: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var h int64
		var sink string
		var n int
		if err := rows.Scan(&h, &sink, &n); err != nil {
			return a, fmt.Errorf("activity: %w", err)
		}
		deliveries[fromUS(h*usPerHour)] += n
		a.Delivered[sink] += n
	}
	if err := rows.Err(); err != nil {
		return a, fmt.Errorf("activity: %w", err)
	}
	a.Hours = store.MergeHours(files, deliveries)
	return a, nil
}

var _ store.LeaseReader = (*Store)(nil)

// LeaseStates implements store.LeaseReader.
func (s *Store) LeaseStates(ctx context.Context) ([]store.LeaseState, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, holder, token, expires_at FROM lease ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("lease states: %w", err)
	}
	out, err := store.CollectRows(rows, func() { rows.Close() }, func(r store.Rows) (store.LeaseState, error) {
		var l store.LeaseState
		var exp int64
		err := r.Scan(&l.Name, &l.Holder, &l.Token, &exp)
		l.ExpiresAt = fromUS(exp)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("lease states: %w", err)
	}
	return out, nil
}
