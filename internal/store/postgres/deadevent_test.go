package postgres

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// TestDeadEventNotifies: a Dead that inserts a delivery.dead event
// notifies the listening relays, as an ingest does, so another replica
// delivers it without waiting for its idle poll.
func TestDeadEventNotifies(t *testing.T) {
	s := newStore(t).(*Store)
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := storetest.IngestNow(t, s, "d.835", storetest.Fixture(t, "835_canonical.x12")); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Claim(ctx, time.Now().UTC(), []string{"ledger"}, 10, time.Minute)
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %d %v", len(rows), err)
	}
	wakes := make(chan struct{}, 10)
	stopped := make(chan struct{})
	go func() {
		s.Listen(ctx, func() { wakes <- struct{}{} }, nil)
		close(stopped)
	}()
	defer func() { cancel(); <-stopped }()
	select {
	case <-wakes: // the wake Listen sends once it listens
	case <-time.After(30 * time.Second):
		t.Fatal("not listening")
	}
	if err := s.Dead(ctx, rows[0].ID, rows[0].LeaseToken, time.Now().UTC(), outbox.Failure{HTTPStatus: 400,
		DeadEvent: &outbox.DeadEvent{Sink: "chat", Payload: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wakes:
	case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("no notification for the delivery.dead event")
	}
}
