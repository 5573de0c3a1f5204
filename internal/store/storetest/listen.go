package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/store"
)

// Listener is a store that wakes the relays of its process when rows
// become due (`run` wakes its relay with it).
type Listener interface {
	Listen(ctx context.Context, wake func(), onError func(err error, retryIn time.Duration)) error
}

// testIngestWakesListeners: a listening relay is woken once it listens,
// by an ingest's commit and by a sink enabled again, so a new payment is
// claimed at once rather than at the relay's next idle claim. (On
// PostgreSQL the suite's stores share a database, and so its channel: a
// wake-up may come of another case's ingest. SQLite's file is the case's
// own.)
func testIngestWakesListeners(t *testing.T, s store.Store) {
	l, ok := s.(Listener)
	if !ok {
		t.Fatalf("%T has no Listen", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	woken := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Listen(ctx, func() {
			select { // never blocks Listen: another case's notifications may come too
			case woken <- struct{}{}:
			default:
			}
		}, nil)
	}()
	defer func() { cancel(); <-done }()
	wait := func(what string) {
		t.Helper()
		select {
		case <-woken:
		case <-time.After(10 * time.Second):
			t.Fatalf("no wake-up %s in 10s", what)
		}
		for len(woken) > 0 { // only the one asked for counts
			<-woken
		}
	}
	wait("once listening")
	mustIngest(t, s, "a.835", Fixture(t, "835_canonical.x12"))
	wait("after an ingest committed")
	if _, err := s.DisableSink(ctx, "ledger", "test", "op", t0, t0); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.EnableSink(ctx, "ledger", t0); err != nil || !ok {
		t.Fatalf("enable sink: %v %v", ok, err)
	}
	wait("after a sink was enabled")
}
