package console

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/ediwatch/ediwatch/internal/reconcile"
	"github.com/ediwatch/ediwatch/internal/store"
)

// snapshots share the console's heavy reads between viewers: concurrent
// requests for the same key wait for one read, and its result serves
// every request for ttl after it. A read runs under the console's query
// timeout, not a request's context: the viewer who started it may leave
// without failing the others, and each waiting request returns as soon
// as its own client goes.
type snapshots struct {
	ttl     time.Duration
	timeout time.Duration
	now     func() time.Time
	group   singleflight.Group

	mu   sync.Mutex
	kept map[string]snapshot
}

type snapshot struct {
	at  time.Time
	val any
}

// get returns key's value, read by read when none younger than ttl is
// kept.
func (s *snapshots) get(ctx context.Context, key string, read func(ctx context.Context) (any, error)) (any, error) {
	s.mu.Lock()
	if k, ok := s.kept[key]; ok && s.now().Sub(k.at) < s.ttl {
		s.mu.Unlock()
		return k.val, nil
	}
	s.mu.Unlock()
	ch := s.group.DoChan(key, func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
		defer cancel()
		v, err := read(rctx)
		if err == nil {
			s.mu.Lock()
			if s.kept == nil {
				s.kept = map[string]snapshot{}
			}
			for k, old := range s.kept { // a kept value no one asked for again
				if s.now().Sub(old.at) >= s.ttl {
					delete(s.kept, k)
				}
			}
			s.kept[key] = snapshot{at: s.now(), val: v}
			s.mu.Unlock()
		}
		return v, err
	})
	select {
	case res := <-ch:
		return res.Val, res.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// reconciled returns the reconciliation since from, shared as a
// snapshot: from is rounded down to the snapshot's ttl so that viewers
// asking at nearly the same time share one.
func (c *Console) reconciled(ctx context.Context, from, now time.Time) (*reconcile.Report, error) {
	from, now = from.Truncate(c.snap.ttl), now.Truncate(c.snap.ttl)
	v, err := c.snap.get(ctx, "reconcile:"+from.Format(time.RFC3339Nano), func(ctx context.Context) (any, error) {
		return reconcile.Run(ctx, c.st, from, reconcileStuckAfter, now)
	})
	if err != nil {
		return nil, err
	}
	return v.(*reconcile.Report), nil
}

// activity returns Activity since, shared as a snapshot (since rounded
// down to the snapshot's ttl, as reconciled's from).
func (c *Console) activity(ctx context.Context, since time.Time) (store.Activity, error) {
	since = since.Truncate(c.snap.ttl)
	v, err := c.snap.get(ctx, "activity:"+since.Format(time.RFC3339Nano), func(ctx context.Context) (any, error) {
		return c.st.Activity(ctx, since)
	})
	if err != nil {
		return store.Activity{}, err
	}
	return v.(store.Activity), nil
}

// attemptStats returns AttemptStats since, shared as a snapshot.
func (c *Console) attemptStats(ctx context.Context, since time.Time) ([]store.AttemptStats, error) {
	since = since.Truncate(c.snap.ttl)
	v, err := c.snap.get(ctx, "attempts:"+since.Format(time.RFC3339Nano), func(ctx context.Context) (any, error) {
		return c.st.AttemptStats(ctx, since)
	})
	if err != nil {
		return nil, err
	}
	return v.([]store.AttemptStats), nil
}
