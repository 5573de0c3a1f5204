package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ediwatch/ediwatch/internal/store"
)

var _ store.ActivityReader = (*Store)(nil)

// Activity implements store.ActivityReader. Both queries read an index on
// the update time (the delivered rows' partial index); hours are UTC
// whatever the session's time zone.
func (s *Store) Activity(ctx context.Context, since time.Time) (store.Activity, error) {
	a := store.Activity{Delivered: map[string]int{}}
	files, deliveries := map[time.Time]int{}, map[time.Time]int{}
	rows, err := s.pool.Query(ctx, `SELECT date_trunc('hour', updated_at AT TIME ZONE 'UTC'), count(*) FROM remote_file
		WHERE updated_at >= $1 AND status IN ('ingested', 'rejected') GROUP BY 1`, since)
	if err != nil {
		return a, fmt.Errorf("activity: %w", err)
	}
	for rows.Next() {
		var h time.Time
		var n int
		if err := rows.Scan(&h, &n); err != nil {
			rows.Close()
			return a, fmt.Errorf("activity: %w", err)
		}
		files[h.UTC()] += n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return a, fmt.Errorf("activity: %w", err)
	}
	rows, err = s.pool.Query(ctx, `SELECT date_trunc('hour', updated_at AT TIME ZONE 'UTC'), sink, count(*) FROM outbox
		WHERE status IN ('delivered', 'discarded') AND status = 'delivered' AND updated_at >= $1 GROUP BY 1, 2`, since)
	if err != nil {
		return a, fmt.Errorf("activity: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var h time.Time
		var sink string
		var n int
		if err := rows.Scan(&h, &sink, &n); err != nil {
			return a, fmt.Errorf("activity: %w", err)
		}
		deliveries[h.UTC()] += n
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
	rows, err := s.pool.Query(ctx, `SELECT name, holder, token, expires_at FROM lease ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("lease states: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.LeaseState, error) {
		var l store.LeaseState
		err := r.Scan(&l.Name, &l.Holder, &l.Token, &l.ExpiresAt)
		l.ExpiresAt = l.ExpiresAt.UTC()
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("lease states: %w", err)
	}
	return out, nil
}
