package storetest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12gen"
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
	checkDeadCounts(t, s, map[string]int{"ledger": 3, "acks": 1})
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
	checkDeadCounts(t, s, map[string]int{"ledger": 1})
	// A replayed row that dies again is counted again; pruning, which
	// never removes a dead row, leaves the counts as they are.
	again, err := s.Claim(ctx, hour(5), []string{"ledger"}, 10, time.Minute)
	if err != nil || len(again) != 2 {
		t.Fatalf("claim the replayed rows: %d %v", len(again), err)
	}
	dead(again[0], hour(5))
	Complete(ctx, s, again[1].ID, again[1].LeaseToken, hour(5), 200)
	checkDeadCounts(t, s, map[string]int{"ledger": 2})
	if _, err := s.Prune(ctx, hour(24*30), 100); err != nil {
		t.Fatal(err)
	}
	checkDeadCounts(t, s, map[string]int{"ledger": 2})
	if n, err := s.Discard(ctx, outbox.DeadFilter{}, hour(6)); err != nil || n != 2 {
		t.Fatalf("discard all: %d %v", n, err)
	}
	checkDeadCounts(t, s, map[string]int{})
}

// checkDeadCounts: the dead rows each sink has, as Stats, CountDead of
// every sink and of each sink count them, are want, and are the rows
// ListDead lists.
func checkDeadCounts(t *testing.T, s store.Store, want map[string]int) {
	t.Helper()
	ctx := context.Background()
	rows, err := s.ListDead(ctx, outbox.DeadFilter{}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	listed, total := map[string]int{}, 0
	for _, r := range rows {
		listed[r.Sink]++
	}
	for sink, n := range want {
		total += n
		if listed[sink] != n {
			t.Errorf("listed %d dead rows at %s, want %d", listed[sink], sink, n)
		}
	}
	if n, err := s.CountDead(ctx, outbox.DeadFilter{}); err != nil || n != total {
		t.Errorf("CountDead: %d %v, want %d", n, err, total)
	}
	stats, err := s.Stats(ctx, t0)
	if err != nil {
		t.Fatal(err)
	}
	counted := map[string]int{}
	for _, st := range stats {
		counted[st.Sink] = st.Dead
	}
	for _, sink := range []string{"ledger", "acks"} {
		if counted[sink] != want[sink] {
			t.Errorf("Stats: %d dead rows at %s, want %d", counted[sink], sink, want[sink])
		}
		if n, err := s.CountDead(ctx, outbox.DeadFilter{Sink: sink}); err != nil || n != want[sink] {
			t.Errorf("CountDead of %s: %d %v, want %d", sink, n, err, want[sink])
		}
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

// testDeadClaimPassedByALaterOne: a dead claim event whose later event of
// the same claim (a void) was delivered after it died is selected by
// DeadFilter.Passed, for listing, counting and a warning before replay;
// while the later event waits undelivered it is not (a replay puts the
// dead one first again), and rows of other kinds never are.
func testDeadClaimPassedByALaterOne(t *testing.T, s store.Store) {
	ctx := context.Background()
	for i, freq := range []string{"1", "8"} { // the claim, then its void
		var b bytes.Buffer
		x12gen.Claims{Control: 70 + i, Claims: 1, IDPrefix: "PASSED-", Frequency: freq}.Write(&b)
		mustIngest(t, s, fmt.Sprintf("c%d.837", i), b.Bytes())
	}
	seedPayments(t, s, 1)
	first, err := s.Claim(ctx, t0, []string{"ledger"}, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var original outbox.Row
	for _, r := range first {
		if r.Kind == process.KindClaim {
			original = r
		} else if err := s.Dead(ctx, r.ID, r.LeaseToken, t0, outbox.Failure{HTTPStatus: 500, Error: "down"}); err != nil {
			t.Fatal(err) // the payment, dead too: never passed
		}
	}
	if original.ID == 0 || len(first) != 2 {
		t.Fatalf("claimed %d rows, want the original claim (its void waits behind it) and the payment", len(first))
	}
	if err := s.Dead(ctx, original.ID, original.LeaseToken, t0, outbox.Failure{HTTPStatus: 422, Error: "refused"}); err != nil {
		t.Fatal(err)
	}
	passed := func() []int64 {
		t.Helper()
		rows, err := s.ListDead(ctx, outbox.DeadFilter{Passed: true}, 10)
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.CountDead(ctx, outbox.DeadFilter{Passed: true})
		if err != nil || n != len(rows) {
			t.Fatalf("count %d (%v), list %d", n, err, len(rows))
		}
		var ids []int64
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		return ids
	}
	if got := passed(); len(got) != 0 {
		t.Fatalf("passed before the void was delivered: %v", got)
	}
	void, err := s.Claim(ctx, t0.Add(time.Minute), []string{"ledger"}, 10, time.Minute)
	if err != nil || len(void) != 1 || void[0].Kind != process.KindClaim || void[0].OrderingKey != original.OrderingKey {
		t.Fatalf("the void, claimable once the original died: %d rows %v", len(void), err)
	}
	if lost, err := s.CompleteMany(ctx, []outbox.Completion{{ID: void[0].ID, Token: void[0].LeaseToken, HTTPStatus: 200}},
		t0.Add(time.Minute)); err != nil || len(lost) != 0 {
		t.Fatalf("deliver the void: %v %v", lost, err)
	}
	if got := passed(); !slices.Equal(got, []int64{original.ID}) {
		t.Errorf("passed dead claims %v, want the original %d", got, original.ID)
	}
	if n, err := s.CountDead(ctx, outbox.DeadFilter{Passed: true, Sink: "audit"}); err != nil || n != 0 {
		t.Errorf("passed at another sink: %d %v", n, err)
	}
}
