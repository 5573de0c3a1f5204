package outbox_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
)

// TestA410SentBeforeTheEnableLeavesTheSinkEnabled: a 410 that answers a
// request sent before an operator enabled the sink (the receiver is back;
// the request went out while it was gone) does not disable the sink
// again: the row is tried again and delivered.
func TestA410SentBeforeTheEnableLeavesTheSinkEnabled(t *testing.T) {
	drivers(t, func(t *testing.T, st store.Store) {
		inFlight, release, enabled := make(chan struct{}), make(chan struct{}), make(chan struct{})
		f := &sinkFixture{st: st}
		f.ledger = newReceiver(t, func(n int) (int, http.Header) {
			if n == 1 {
				close(inFlight)
				<-release
				return http.StatusGone, nil
			}
			return http.StatusOK, nil
		})
		f.acks = newReceiver(t, func(int) (int, http.Header) { return http.StatusOK, nil })
		f.ingest(t, 1)
		go func() {
			<-inFlight
			ctx := context.Background()
			now := time.Now().UTC()
			if _, err := st.DisableSink(ctx, "ledger", "by hand", "operator", now, now); err != nil {
				t.Error(err)
			}
			if _, err := st.EnableSink(ctx, "ledger", time.Now().UTC().Add(time.Millisecond)); err != nil {
				t.Error(err)
			}
			close(enabled)
			close(release)
		}()
		ls, _ := sink.New(sink.Config{Name: "ledger", URL: f.ledger.URL, Timeout: 30 * time.Second})
		as, _ := sink.New(sink.Config{Name: "acks", URL: f.acks.URL})
		r := outbox.NewRelay(outbox.RelayConfig{Workers: 1, Idle: 20 * time.Millisecond, BackoffBase: 10 * time.Millisecond},
			st, map[string]outbox.Deliverer{"ledger": ls, "acks": as}, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
		// Judge only after the enable: the hand disable before it is
		// itself a moment of "disabled".
		runUntil(t, r, func() bool {
			select {
			case <-enabled:
			default:
				return false
			}
			return f.delivered("ledger") == 1 || f.state("ledger").Disabled
		})
		if s := f.state("ledger"); s.Disabled {
			t.Fatalf("the sink was disabled again by a 410 to a request sent before its enable: %+v", s)
		}
		if n := len(f.ledger.got()); n != 2 {
			t.Errorf("the receiver got %d requests, want the 410 and the delivery", n)
		}
	})
}
