package outbox_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// recordingFails is a real store whose first CompleteMany calls fail as
// a store restarting (a PostgreSQL failover) fails them.
type recordingFails struct {
	store.Store
	fails atomic.Int32
}

func (s *recordingFails) CompleteMany(ctx context.Context, done []outbox.Completion, now time.Time) ([]int64, error) {
	if s.fails.Add(-1) >= 0 {
		return nil, errors.New("recording deliveries: connection refused")
	}
	return s.Store.CompleteMany(ctx, done, now)
}

// TestDeliveryRecordedAfterTheStoreComesBack: the store refuses the
// recording of a batch's deliveries once (it is restarting) while the
// rows' leases are still held. The relay records them when it answers
// again instead of dropping them, so the rows are not reaped and posted a
// second time.
func TestDeliveryRecordedAfterTheStoreComesBack(t *testing.T) {
	drivers(t, func(t *testing.T, st store.Store) {
		if _, err := storetest.Ingest(t, st, "a.835", storetest.Fixture(t, "835_canonical.x12")); err != nil {
			t.Fatal(err)
		}
		rc := newReceiver(t, func(int) (int, http.Header) { return 200, nil })
		s, _ := sink.New(sink.Config{Name: "ledger", URL: rc.URL})
		flaky := &recordingFails{Store: st}
		flaky.fails.Store(1)
		r := outbox.NewRelay(outbox.RelayConfig{Workers: 1, Lease: time.Minute}, flaky,
			map[string]outbox.Deliverer{"ledger": s, "acks": s}, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
		clock := time.Date(2026, 11, 30, 12, 0, 1, 0, time.UTC)
		r.SetClock(func() time.Time { return clock })
		ctx := context.Background()
		if n, err := r.RunOnce(ctx); err != nil || n != 2 {
			t.Fatalf("handled %d rows: %v", n, err)
		}
		// An hour on, any lease not released has lapsed and is reaped.
		clock = clock.Add(time.Hour)
		st.ReapExpired(ctx, clock)
		r.RunOnce(ctx)
		c, _ := st.Counts(ctx)
		if got := len(rc.got()); got != 2 || c.Outbox[outbox.StatusDelivered] != 2 {
			t.Errorf("%d requests for 2 effects; %d rows recorded delivered", got, c.Outbox[outbox.StatusDelivered])
		}
	})
}
