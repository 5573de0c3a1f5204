package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/store"
)

// testDeadFilter: dead rows are selected by sink, kind and when they were
// dead-lettered (since <= t < until), for listing, replay and discard
// alike; rows outside the filter are left dead.
func testDeadFilter(t *testing.T, s store.Store) {
	ctx := context.Background()
	// Three payment rows (ledger) and three 999s (acks), of which one can
	// be claimed: the acks to one partner share an ordering key.
	seedPayments(t, s, 3)
	pays, _ := s.Claim(ctx, t0, []string{"ledger"}, 10, time.Minute)
	acks, _ := s.Claim(ctx, t0, []string{"acks"}, 10, time.Minute)
	if len(pays) != 3 || len(acks) != 1 {
		t.Fatalf("claimed %d payments and %d acks", len(pays), len(acks))
	}
	hour := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	dead := func(r outbox.Row, at time.Time) {
		t.Helper()
		if err := s.Dead(ctx, r.ID, r.LeaseToken, at, outbox.Failure{HTTPStatus: 500, Error: "down"}); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c, ack := pays[0], pays[1], pays[2], acks[0]
	dead(a, hour(1))
	dead(b, hour(2))
	dead(c, hour(3))
	dead(ack, hour(2))
	ids := func(f outbox.DeadFilter) []int64 {
		t.Helper()
		rows, err := s.ListDead(ctx, f, 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, r := range rows {
			out = append(out, r.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		f    outbox.DeadFilter
		want []int64
	}{
		{"all", outbox.DeadFilter{}, []int64{a.ID, b.ID, c.ID, ack.ID}},
		{"since", outbox.DeadFilter{Since: hour(2)}, []int64{b.ID, c.ID, ack.ID}},
		{"until", outbox.DeadFilter{Until: hour(2)}, []int64{a.ID}},
		{"between", outbox.DeadFilter{Since: hour(2), Until: hour(3)}, []int64{b.ID, ack.ID}},
		{"sink", outbox.DeadFilter{Sink: "ledger", Since: hour(2)}, []int64{b.ID, c.ID}},
		{"kind", outbox.DeadFilter{Kind: process.KindAck999}, []int64{ack.ID}},
		{"ids", outbox.DeadFilter{IDs: []int64{a.ID, c.ID}, Since: hour(2)}, []int64{c.ID}},
	} {
		got := ids(tc.f)
		slices.Sort(got)
		want := slices.Sorted(slices.Values(tc.want))
		if !slices.Equal(got, want) {
			t.Errorf("%s: dead rows %v, want %v", tc.name, got, want)
		}
	}
	// Replay the payments that died since hour 2: b and c; a and the ack
	// stay dead.
	if n, err := s.Replay(ctx, outbox.DeadFilter{Sink: "ledger", Since: hour(2)}, hour(4)); err != nil || n != 2 {
		t.Fatalf("replay: %d %v", n, err)
	}
	for _, r := range []outbox.Row{b, c} {
		if got, _ := s.GetOutbox(ctx, r.ID); got.Status != outbox.StatusPending || got.Attempts != 0 {
			t.Errorf("replayed row %d: %s, %d attempts", r.ID, got.Status, got.Attempts)
		}
	}
	// Discard the 999s: the ack only; a stays dead.
	if n, err := s.Discard(ctx, outbox.DeadFilter{Kind: process.KindAck999}, hour(4)); err != nil || n != 1 {
		t.Fatalf("discard: %d %v", n, err)
	}
	if got, _ := s.GetOutbox(ctx, ack.ID); got.Status != outbox.StatusDiscarded {
		t.Errorf("discarded ack: %s", got.Status)
	}
	if got := ids(outbox.DeadFilter{}); !slices.Equal(got, []int64{a.ID}) {
		t.Errorf("dead after replay and discard: %v, want only %d", got, a.ID)
	}
}

// testDeadFilterZones: since and until given in another time zone (an RFC
// 3339 offset) bound the same instants; rows that are not dead are never
// selected, whatever the filter.
func testDeadFilterZones(t *testing.T, s store.Store) {
	ctx := context.Background()
	seedPayments(t, s, 2)
	pays, _ := s.Claim(ctx, t0, []string{"ledger"}, 10, time.Minute)
	if len(pays) != 2 {
		t.Fatalf("claimed %d", len(pays))
	}
	if err := s.Dead(ctx, pays[0].ID, pays[0].LeaseToken, t0.Add(time.Hour), outbox.Failure{HTTPStatus: 500, Error: "down"}); err != nil {
		t.Fatal(err)
	}
	// pays[1] stays inflight, updated inside every window below.
	east := time.FixedZone("UTC+5", 5*3600)
	for _, f := range []outbox.DeadFilter{
		{Since: t0.Add(time.Hour).In(east)},
		{Since: t0.In(east), Until: t0.Add(2 * time.Hour).In(east)},
		{IDs: []int64{pays[0].ID, pays[1].ID}, Sink: "ledger", Since: t0.Add(-time.Hour).In(east)},
	} {
		rows, err := s.ListDead(ctx, f, 10)
		if err != nil || len(rows) != 1 || rows[0].ID != pays[0].ID {
			t.Errorf("filter %+v: %d rows %v, want only the dead row %d", f, len(rows), err, pays[0].ID)
		}
	}
	if rows, _ := s.ListDead(ctx, outbox.DeadFilter{Since: t0.Add(time.Hour + time.Microsecond).In(east)}, 10); len(rows) != 0 {
		t.Errorf("since after the dead-lettering: %d rows", len(rows))
	}
	if n, err := s.Replay(ctx, outbox.DeadFilter{IDs: []int64{pays[1].ID}}, t0.Add(3*time.Hour)); err != nil || n != 0 {
		t.Errorf("replay of an inflight row: %d %v", n, err)
	}
	if n, err := s.Discard(ctx, outbox.DeadFilter{IDs: []int64{pays[1].ID}}, t0.Add(3*time.Hour)); err != nil || n != 0 {
		t.Errorf("discard of an inflight row: %d %v", n, err)
	}
}
