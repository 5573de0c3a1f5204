package store

import (
	"context"
	"slices"
	"time"
)

// HourCount is what happened in one hour (UTC, truncated to the hour).
type HourCount struct {
	Hour time.Time
	// Files counts ledger rows recorded final in the hour (ingested or
	// rejected, by their last update).
	Files int
	// Deliveries counts outbox rows delivered in the hour.
	Deliveries int
}

// Activity is the recent work of every replica, for the console's
// overview.
type Activity struct {
	// Hours holds the hours since the time asked, oldest first; an hour
	// with neither files nor deliveries is absent.
	Hours []HourCount
	// Delivered counts the rows delivered since, per sink.
	Delivered map[string]int
}

// ActivityReader reads recent activity. Read only; safe for concurrent
// use.
type ActivityReader interface {
	// Activity returns the files and deliveries per hour since since, and
	// the deliveries per sink.
	Activity(ctx context.Context, since time.Time) (Activity, error)
}

// MergeHours folds files and deliveries counted per hour into Hours,
// oldest first.
func MergeHours(files, deliveries map[time.Time]int) []HourCount {
	by := map[time.Time]*HourCount{}
	get := func(h time.Time) *HourCount {
		h = h.UTC()
		if c, ok := by[h]; ok {
			return c
		}
		c := &HourCount{Hour: h}
		by[h] = c
		return c
	}
	for h, n := range files {
		get(h).Files += n
	}
	for h, n := range deliveries {
		get(h).Deliveries += n
	}
	out := make([]HourCount, 0, len(by))
	for _, c := range by {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b HourCount) int { return a.Hour.Compare(b.Hour) })
	return out
}

// LeaseState is a lease as the store holds it: a source directory's
// ("poll:{source}:{directory}") or the maintenance leader's.
type LeaseState struct {
	Name, Holder string
	Token        int64
	// ExpiresAt is when the lease lapses unless renewed (on PostgreSQL by
	// the database's clock).
	ExpiresAt time.Time
}

// LeaseReader lists the leases. Read only; safe for concurrent use.
type LeaseReader interface {
	// LeaseStates returns every lease, by name.
	LeaseStates(ctx context.Context) ([]LeaseState, error)
}
