package outbox_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/postgres/pgtest"
)

// TestReplicaWithFastClockTakesNoLiveLease: three relays on one
// PostgreSQL, on hosts whose clocks run right, ten minutes fast and ten
// minutes slow, deliver to a receiver slower than the lease. No reaper may
// take another replica's rows while their leases are live (and extended;
// the slow replica's would look lapsed to the others): every
// payment is posted once: both relays follow the database's clock
// (RelayConfig.Clock, which ediwatch run sets on PostgreSQL).
func TestReplicaWithFastClockTakesNoLiveLease(t *testing.T) {
	st := pgtest.New(t, postgres.Options{})
	const payments = 6
	ingestPayments(t, st, payments)
	var mu sync.Mutex
	seen := map[string]int{}
	rc := counting(t, func(r *http.Request) {
		time.Sleep(2 * time.Second) // slower than the lease, which is extended
		mu.Lock()
		seen[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
	})
	s, _ := sink.New(sink.Config{Name: "ledger", URL: rc.URL, Timeout: 10 * time.Second})
	newRelay := func(clock func() time.Time) *outbox.Relay {
		r := outbox.NewRelay(outbox.RelayConfig{Workers: 1, Batch: 1, Lease: 1500 * time.Millisecond,
			Idle: 20 * time.Millisecond, Clock: st}, st, map[string]outbox.Deliverer{"ledger": s, "acks": s}, zap.NewNop(),
			metrics.New(prometheus.NewRegistry()))
		r.SetClock(clock)
		return r
	}
	normal := newRelay(func() time.Time { return time.Now().UTC() })
	fast := newRelay(func() time.Time { return time.Now().UTC().Add(10 * time.Minute) })
	slow := newRelay(func() time.Time { return time.Now().UTC().Add(-10 * time.Minute) })
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range []*outbox.Relay{normal, fast, slow} {
		wg.Add(1)
		go func() { defer wg.Done(); r.Run(ctx) }()
	}
	deadline := time.Now().Add(2 * time.Minute) // a hang guard
	for time.Now().Before(deadline) {
		c, _ := st.Counts(context.Background())
		if c.Outbox[outbox.StatusDelivered] == payments+1 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s posted %d times", k, n)
		}
	}
	if len(seen) != payments+1 {
		t.Errorf("%d effects posted, want %d", len(seen), payments+1)
	}
}
