package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
)

// testStale410LeavesEnabledSink: a 410 that answers a request sent before
// the sink was last enabled does not disable it again (the operator
// enabled it because the receiver is back; the request went out before),
// nor park its rows; a 410 to a request sent after the enable does.
func testStale410LeavesEnabledSink(t *testing.T, s store.Store) {
	ctx := context.Background()
	addEffects(t, s, "stale410.x12",
		outbox.Effect{Kind: "payment.posted", Key: "s1", OrderingKey: "a", Sink: "ledger"})
	if changed, err := s.DisableSink(ctx, "ledger", outbox.GoneReason, "relay", t0, t0); err != nil || !changed {
		t.Fatalf("disable: %v %v", changed, err)
	}
	enabledAt := t0.Add(time.Minute)
	if changed, err := s.EnableSink(ctx, "ledger", enabledAt); err != nil || !changed {
		t.Fatalf("enable: %v %v", changed, err)
	}
	// Sent before the enable, answered after it.
	if changed, err := s.DisableSink(ctx, "ledger", outbox.GoneReason, "relay", enabledAt.Add(time.Second),
		enabledAt.Add(-time.Second)); err != nil || changed {
		t.Errorf("a 410 to a request sent before the enable: changed %v, %v; want the sink left enabled", changed, err)
	}
	states, err := s.SinkStates(ctx)
	if err != nil || len(states) != 1 || states[0].Disabled {
		t.Errorf("states %+v %v, want ledger enabled", states, err)
	}
	if r := rowByKey(t, s, "s1"); r.Status != outbox.StatusPending || r.NextAttemptAt.After(enabledAt) {
		t.Errorf("row %s due %s, want pending and due since the enable", r.Status, r.NextAttemptAt)
	}
	// Sent after the enable: the receiver is still gone.
	if changed, err := s.DisableSink(ctx, "ledger", outbox.GoneReason, "relay", enabledAt.Add(3*time.Second),
		enabledAt.Add(2*time.Second)); err != nil || !changed {
		t.Errorf("a 410 to a request sent after the enable: changed %v, %v; want the sink disabled", changed, err)
	}
}
