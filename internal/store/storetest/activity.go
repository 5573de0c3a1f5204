package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

// testActivityPerHourAndSink: the console's activity counts files
// recorded final (not retrying ones) and rows delivered per UTC hour, by
// their last update, and deliveries per sink, from the time asked.
func testActivityPerHourAndSink(t *testing.T, s store.Store) {
	ctx := context.Background()
	ingestAs(t, s, "in/a.835", "corr-a", t0, paymentFile(t, 0, 1000))                     // 12:00
	ingestAs(t, s, "in/b.835", "corr-b", t0.Add(90*time.Minute), paymentFile(t, 1, 1001)) // 13:30
	if _, err := s.RecordFileProblem(ctx, inbox.FileInfo{Source: "test", Path: "in/c.835", Size: 1, MTime: t0,
		CorrelationID: "corr-c", Now: t0.Add(30 * time.Minute)}, inbox.FileRetrying, "connection reset"); err != nil {
		t.Fatal(err)
	}
	deliver := func(sink string, at time.Time) {
		t.Helper()
		rows, err := s.Claim(ctx, at, []string{sink}, 1, time.Minute)
		if err != nil || len(rows) != 1 {
			t.Fatalf("claim %s at %v: %d rows, %v", sink, at, len(rows), err)
		}
		if lost, err := s.CompleteMany(ctx, []outbox.Completion{{ID: rows[0].ID, Token: rows[0].LeaseToken, HTTPStatus: 200}}, at); err != nil || len(lost) != 0 {
			t.Fatalf("complete: %v %v", lost, err)
		}
	}
	deliver("ledger", t0.Add(10*time.Minute)) // 12:10
	deliver("acks", t0.Add(70*time.Minute))   // 13:10
	a, err := s.Activity(ctx, t0.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := []store.HourCount{{Hour: t0, Files: 1, Deliveries: 1}, {Hour: t0.Add(time.Hour), Files: 1, Deliveries: 1}}
	if len(a.Hours) != 2 || a.Hours[0] != want[0] || a.Hours[1] != want[1] {
		t.Errorf("hours %+v, want %+v", a.Hours, want)
	}
	if len(a.Delivered) != 2 || a.Delivered["ledger"] != 1 || a.Delivered["acks"] != 1 {
		t.Errorf("delivered %v", a.Delivered)
	}
	a, err = s.Activity(ctx, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Hours) != 1 || a.Hours[0] != want[1] || a.Delivered["ledger"] != 0 || a.Delivered["acks"] != 1 {
		t.Errorf("since 13:00: hours %+v, delivered %v", a.Hours, a.Delivered)
	}
}

// testLeaseStatesListEveryLease: the console's lease reading lists every
// lease by name with its holder, token and expiry, a released one too.
func testLeaseStatesListEveryLease(t *testing.T, s store.Store) {
	ctx := context.Background()
	if got, err := s.LeaseStates(ctx); err != nil || len(got) != 0 {
		t.Fatalf("no leases: %v %v", got, err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	tokA, ok, err := s.AcquireLease(ctx, "poll:acme:/out", "host-a", time.Minute, now)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, ok, err := s.AcquireLease(ctx, "maintenance", "host-b", time.Minute, now); err != nil || !ok {
		t.Fatal(ok, err)
	}
	got, err := s.LeaseStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "maintenance" || got[0].Holder != "host-b" || got[1].Name != "poll:acme:/out" ||
		got[1].Holder != "host-a" || got[1].Token != tokA {
		t.Fatalf("leases %+v", got)
	}
	// PostgreSQL takes expiry from its own clock: only its order of
	// magnitude is certain here.
	if d := got[1].ExpiresAt.Sub(now); d < 30*time.Second || d > 10*time.Minute {
		t.Errorf("expires in %s, want about a minute", d)
	}
}
