package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

// testDisabledSinkNeverClaimed: a disabled sink's rows are never claimed,
// whatever sinks a claimer lists, and stay pending with their attempts;
// a row claimed before the disable and given back waits too; enabling
// makes every waiting row due at once with a fresh age budget.
func testDisabledSinkNeverClaimed(t *testing.T, s store.Store) {
	ctx := context.Background()
	addEffects(t, s, "gone.x12",
		outbox.Effect{Kind: "payment.posted", Key: "l1", OrderingKey: "a", Sink: "ledger"},
		outbox.Effect{Kind: "payment.posted", Key: "l2", OrderingKey: "b", Sink: "ledger"},
		outbox.Effect{Kind: "ack.999", Key: "a1", OrderingKey: "c", Sink: "acks"})
	first, err := s.Claim(ctx, t0, []string{"ledger"}, 1, time.Minute)
	if err != nil || len(first) != 1 {
		t.Fatalf("claim before the disable: %v %v", first, err)
	}
	disabledAt := t0.Add(time.Second)
	if changed, err := s.DisableSink(ctx, "ledger", outbox.GoneReason, "relay", disabledAt, disabledAt); err != nil || !changed {
		t.Fatalf("disable: %v %v", changed, err)
	}
	if changed, err := s.DisableSink(ctx, "ledger", "by hand", "operator", disabledAt.Add(time.Minute), disabledAt.Add(time.Minute)); err != nil || changed {
		t.Fatalf("disable again: changed %v %v, want no change", changed, err)
	}
	states, err := s.SinkStates(ctx)
	if err != nil || len(states) != 1 || states[0] != (outbox.SinkState{Sink: "ledger", Disabled: true, Since: disabledAt,
		Reason: outbox.GoneReason, By: "relay"}) {
		t.Fatalf("states %+v %v, want ledger disabled by the first disable", states, err)
	}
	// The row in flight at the disable comes back without an attempt.
	if err := s.Snooze(ctx, first[0].ID, first[0].LeaseToken, disabledAt, disabledAt); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Hour)
	for _, sinks := range [][]string{nil, {"ledger"}, {"ledger", "acks"}} {
		rows, err := s.Claim(ctx, later, sinks, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Sink == "ledger" {
				t.Errorf("claim of %v took row %d of the disabled sink", sinks, r.ID)
			}
		}
	}
	var waiting []int64
	for _, key := range []string{"l1", "l2"} {
		r := rowByKey(t, s, key)
		if r.Status != outbox.StatusPending || r.Attempts != 0 {
			t.Errorf("%s: %s after %d attempts, want pending with none counted", key, r.Status, r.Attempts)
		}
		waiting = append(waiting, r.ID)
	}
	if r := rowByKey(t, s, "l2"); r.NextAttemptAt.Year() != 9999 {
		t.Errorf("a waiting row not parked: next attempt %s", r.NextAttemptAt)
	}
	enabledAt := t0.Add(2 * time.Hour)
	if changed, err := s.EnableSink(ctx, "ledger", enabledAt); err != nil || !changed {
		t.Fatalf("enable: %v %v", changed, err)
	}
	if changed, err := s.EnableSink(ctx, "ledger", enabledAt.Add(time.Minute)); err != nil || changed {
		t.Fatalf("enable again: changed %v %v, want no change", changed, err)
	}
	if changed, err := s.EnableSink(ctx, "never-disabled", enabledAt); err != nil || changed {
		t.Fatalf("enable a sink never disabled: changed %v %v", changed, err)
	}
	states, err = s.SinkStates(ctx)
	if err != nil || len(states) != 1 || states[0] != (outbox.SinkState{Sink: "ledger", Since: enabledAt}) {
		t.Fatalf("states %+v %v, want ledger enabled since the enable", states, err)
	}
	rows, err := s.Claim(ctx, enabledAt, []string{"ledger"}, 10, time.Minute)
	if err != nil || len(rows) != 2 || rows[0].ID != waiting[0] || rows[1].ID != waiting[1] {
		t.Fatalf("claim at the enable: %v %v, want rows %v", rows, err, waiting)
	}
	for _, r := range rows {
		if !r.AgeFrom.Equal(enabledAt) || r.Attempts != 1 {
			t.Errorf("row %d: age from %s after %d attempts, want a fresh age budget from %s and its first attempt",
				r.ID, r.AgeFrom, r.Attempts, enabledAt)
		}
	}
}

// testDisableSinkConcurrently: of many replicas disabling one sink at once
// (each saw a 410), exactly one changes its state.
func testDisableSinkConcurrently(t *testing.T, s store.Store) {
	ctx := context.Background()
	seedPayments(t, s, 1)
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	changes := 0
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			changed, err := s.DisableSink(ctx, "ledger", outbox.GoneReason, "relay", t0.Add(time.Duration(i)*time.Second), t0.Add(time.Duration(i)*time.Second))
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			if changed {
				changes++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if changes != 1 {
		t.Errorf("%d disables changed the state, want 1", changes)
	}
	if rows, err := s.Claim(ctx, t0.Add(time.Hour), nil, 10, time.Minute); err != nil || len(rows) != 1 || rows[0].Sink != "acks" {
		t.Errorf("claimed %v %v, want only the acks row", rows, err)
	}
}

// testParkDisabled: rows that arrive for a disabled sink are parked by
// ParkDisabled, once; other sinks' rows are untouched; enabling makes them
// due again.
func testParkDisabled(t *testing.T, s store.Store) {
	ctx := context.Background()
	if n, err := s.ParkDisabled(ctx); err != nil || n != 0 {
		t.Fatalf("park with no sink disabled: %d %v", n, err)
	}
	if _, err := s.DisableSink(ctx, "ledger", "by hand", "operator", t0, t0); err != nil {
		t.Fatal(err)
	}
	addEffects(t, s, "late.x12",
		outbox.Effect{Kind: "payment.posted", Key: "late", OrderingKey: "a", Sink: "ledger"},
		outbox.Effect{Kind: "ack.999", Key: "ack", OrderingKey: "c", Sink: "acks"})
	if r := rowByKey(t, s, "late"); r.NextAttemptAt.Year() == 9999 {
		t.Fatal("a row that arrived after the disable is parked already")
	}
	if n, err := s.ParkDisabled(ctx); err != nil || n != 1 {
		t.Fatalf("park: %d %v, want the late ledger row", n, err)
	}
	if n, err := s.ParkDisabled(ctx); err != nil || n != 0 {
		t.Fatalf("park again: %d %v, want nothing", n, err)
	}
	if r := rowByKey(t, s, "late"); r.NextAttemptAt.Year() != 9999 || r.Status != outbox.StatusPending {
		t.Errorf("late row %s, next attempt %s, want pending and parked", r.Status, r.NextAttemptAt)
	}
	if r := rowByKey(t, s, "ack"); !r.NextAttemptAt.Equal(t0) {
		t.Errorf("the acks row moved to %s", r.NextAttemptAt)
	}
	enabledAt := t0.Add(time.Hour)
	if _, err := s.EnableSink(ctx, "ledger", enabledAt); err != nil {
		t.Fatal(err)
	}
	if n, err := s.ParkDisabled(ctx); err != nil || n != 0 {
		t.Fatalf("park after the enable: %d %v", n, err)
	}
	rows, err := s.Claim(ctx, enabledAt, []string{"ledger"}, 10, time.Minute)
	if err != nil || len(rows) != 1 || rows[0].EffectKey != "late" {
		t.Errorf("claim after the enable: %v %v", rows, err)
	}
}

// rowByKey returns the outbox row with effect key key.
func rowByKey(t *testing.T, s store.Store, key string) outbox.Row {
	t.Helper()
	for id := int64(1); id < 100; id++ {
		r, err := s.GetOutbox(context.Background(), id)
		if err == nil && r.EffectKey == key {
			return r
		}
	}
	t.Fatalf("no row with effect key %s", key)
	return outbox.Row{}
}
