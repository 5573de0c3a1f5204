package outbox_test

import (
	"net/http"
	"testing"

	"github.com/ediwatch/ediwatch/internal/outbox"
)

// TestBreakerStatesNameEachSinksBreaker: BreakerStates (the console's
// reading) says closed for every sink at start and open for a sink whose
// receiver failed its breaker's count, while the other stays closed.
func TestBreakerStatesNameEachSinksBreaker(t *testing.T) {
	ledger := newReceiver(t, func(int) (int, http.Header) { return http.StatusServiceUnavailable, nil })
	acks := newReceiver(t, func(int) (int, http.Header) { return http.StatusOK, nil })
	h := newTwoSinkHarness(t, ledger, acks, outbox.RelayConfig{MaxAttempts: 20, Sinks: map[string]outbox.SinkLimits{
		"ledger": {BreakerFailures: 2}}})
	if got := h.r.BreakerStates(); len(got) != 2 || got["ledger"] != "closed" || got["acks"] != "closed" {
		t.Fatalf("at start: %v", got)
	}
	for range 4 {
		h.round(t)
	}
	if got := h.r.BreakerStates(); got["ledger"] != "open" || got["acks"] != "closed" {
		t.Errorf("after the ledger's failures: %v", got)
	}
}
