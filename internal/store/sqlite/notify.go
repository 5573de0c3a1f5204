package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// notifier wakes the relays of this process listening on a database
// (Listen) when a write that makes outbox rows due commits: an ingest,
// or a sink enabled again. SQLite has no notifications of its own, and
// none between processes: a relay of another process on the same file
// (or a row written by `ediwatch ingest`) is found at its next idle
// claim.
type notifier struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

// notifiers holds a notifier per database file, shared by every Store
// of the process opened on it: `run` enables a sink through the
// console's pool and delivers through its own.
var notifiers sync.Map // path -> *notifier

// notifierFor returns the notifier of the database at path (a DSN's
// path, "file:" and all), one for every spelling of the same file.
func notifierFor(path string) *notifier {
	name := strings.TrimPrefix(path, "file:")
	if abs, err := filepath.Abs(name); err == nil && name != "" && !strings.Contains(name, ":memory:") {
		name = abs
	}
	n, _ := notifiers.LoadOrStore(name, &notifier{subs: map[chan struct{}]struct{}{}})
	return n.(*notifier)
}

// notify wakes every listener; it never blocks.
func (n *notifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for c := range n.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// Listen calls wake once it listens (rows may have come before) and
// whenever a write of this process that makes outbox rows due commits,
// until ctx is cancelled: postgres.Store.Listen's contract. onError is
// never called: nothing here can fail.
func (s *Store) Listen(ctx context.Context, wake func(), onError func(err error, retryIn time.Duration)) error {
	c := make(chan struct{}, 1)
	s.wakes.mu.Lock()
	s.wakes.subs[c] = struct{}{}
	s.wakes.mu.Unlock()
	defer func() {
		s.wakes.mu.Lock()
		delete(s.wakes.subs, c)
		s.wakes.mu.Unlock()
	}()
	wake()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c:
			wake()
		}
	}
}
