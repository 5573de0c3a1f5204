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
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
)

// stopDuringClaim is a store whose claim commits and is then told to stop:
// the relay's context is cancelled as the claim returns, and a claim whose
// own context was cancelled reports it, as a driver does when the
// cancellation lands after the database committed (the rows are claimed,
// the caller is told they are not).
type stopDuringClaim struct {
	store.Store
	stop context.CancelFunc
}

func (s stopDuringClaim) Claim(ctx context.Context, now time.Time, sinks []string, limit int, lease time.Duration) ([]outbox.Row, error) {
	rows, err := s.Store.Claim(context.WithoutCancel(ctx), now, sinks, limit, lease)
	s.stop()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return rows, err
}

// TestStopDuringAClaimGivesTheRowsBack: a stop that arrives while a claim
// commits leaves no row inflight until its lease lapses: the claim is not
// cut short by the stop, and the rows it took are given back at once,
// undelivered, their attempt not counted.
func TestStopDuringAClaimGivesTheRowsBack(t *testing.T) {
	ctx := context.Background()
	st := drivertest.SQLite(t)
	ingestPayments(t, st, 3)
	rc := counting(t, func(*http.Request) {})
	s, _ := sink.New(sink.Config{Name: "ledger", URL: rc.URL, Timeout: 5 * time.Second})
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := outbox.NewRelay(outbox.RelayConfig{Workers: 1, Batch: 16}, stopDuringClaim{Store: st, stop: cancel},
		map[string]outbox.Deliverer{"ledger": s, "acks": s}, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
	if _, err := r.RunOnce(rctx); err != nil {
		t.Fatalf("run once: %v", err)
	}
	c, err := st.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rc.got()); n != 0 || c.Outbox[outbox.StatusInflight] != 0 || c.Outbox[outbox.StatusPending] == 0 {
		t.Fatalf("%d requests after a stop during the claim; outbox %v (want every row pending)", n, c.Outbox)
	}
	rows, err := st.Claim(ctx, time.Now().Add(time.Hour), []string{"ledger", "acks"}, 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if row.Attempts != 1 {
			t.Errorf("row %d claimed again as attempt %d, want 1: the stopped claim counted an attempt", row.ID, row.Attempts)
		}
	}
}
