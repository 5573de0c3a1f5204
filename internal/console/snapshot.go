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
// every request for ttl after it. After ttl, and until stale, the kept
// result is still served at once while one read refreshes it in the
// background: a viewer waits for a read only when none younger than
// stale is kept, so twenty viewers' answers do not queue behind each
// refresh. A read runs under the console's query timeout, not a
// request's context: the viewer who started it may leave without
// failing the others, and each waiting request returns as soon as its
// own client goes.
type snapshots struct {
	ttl, stale time.Duration
	timeout    time.Duration
	now        func() time.Time
	group      singleflight.Group

	mu   sync.Mutex
	kept map[string]snapshot
}

type snapshot struct {
	at  time.Time
	val any
}

// get returns key's value, read by read when none younger than ttl is
// kept (see snapshots).
func (s *snapshots) get(ctx context.Context, key string, read func(ctx context.Context) (any, error)) (any, error) {
	s.mu.Lock()
	k, ok := s.kept[key]
	s.mu.Unlock()
	age := s.now().Sub(k.at)
	if ok && age < s.ttl {
		return k.val, nil
	}
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
				if s.now().Sub(old.at) >= s.stale {
					delete(s.kept, k)
				}
			}
			s.kept[key] = snapshot{at: s.now(), val: v}
			s.mu.Unlock()
		}
		return v, err
	})
	if ok && age < s.stale {
		return k.val, nil // the refresh goes on without this viewer
	}
	select {
	case res := <-ch:
		return res.Val, res.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// window names a window of reads ending now: its length, rounded to the
// snapshot's ttl, so that the snapshot of "the last 24 hours" is one key
// however time moves.
func (s *snapshots) window(kind string, from, now time.Time) string {
	return kind + ":" + now.Sub(from).Round(s.ttl).String()
}

// since names a window of reads from a fixed time: its start.
func (s *snapshots) since(kind string, from time.Time) string {
	return kind + "@" + from.Truncate(s.ttl).Format(time.RFC3339Nano)
}

// reconciled returns the reconciliation since from, shared as a
// snapshot of its window: of the last so long (relative), or from a
// fixed time.
func (c *Console) reconciled(ctx context.Context, from, now time.Time, relative bool) (*reconcile.Report, error) {
	key := c.snap.since("reconcile", from)
	if relative {
		key = c.snap.window("reconcile", from, now)
	}
	v, err := c.snap.get(ctx, key, func(ctx context.Context) (any, error) {
		return reconcile.Run(ctx, c.st, from, reconcileStuckAfter, now)
	})
	if err != nil {
		return nil, err
	}
	return v.(*reconcile.Report), nil
}

// activity returns Activity since, shared as a snapshot of its window.
func (c *Console) activity(ctx context.Context, since, now time.Time) (store.Activity, error) {
	v, err := c.snap.get(ctx, c.snap.window("activity", since, now), func(ctx context.Context) (any, error) {
		return c.st.Activity(ctx, since)
	})
	if err != nil {
		return store.Activity{}, err
	}
	return v.(store.Activity), nil
}

// attemptStats returns AttemptStats since, shared as a snapshot of its
// window.
func (c *Console) attemptStats(ctx context.Context, since, now time.Time) ([]store.AttemptStats, error) {
	v, err := c.snap.get(ctx, c.snap.window("attempts", since, now), func(ctx context.Context) (any, error) {
		return c.st.AttemptStats(ctx, since)
	})
	if err != nil {
		return nil, err
	}
	return v.([]store.AttemptStats), nil
}
