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
	"github.com/ediwatch/ediwatch/internal/store/postgres"
	"github.com/ediwatch/ediwatch/internal/store/postgres/pgtest"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

// TestNotifyWakesTheRelay: with a one-minute idle poll, only LISTEN/NOTIFY
// can wake the relay; an ingest is delivered within a second of commit.
func TestNotifyWakesTheRelay(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := pgtest.New(t, postgres.Options{})
	stopped := make(chan struct{}, 2)
	defer func() {
		cancel() // the listener and relay let go of their connections before the store closes
		<-stopped
		<-stopped
	}()
	delivered := make(chan time.Time, 4)
	rc := newReceiver(t, func(int) (int, http.Header) {
		delivered <- time.Now()
		return 200, nil
	})
	s, _ := sink.New(sink.Config{Name: "ledger", URL: rc.URL})
	r := outbox.NewRelay(outbox.RelayConfig{Workers: 2, Idle: time.Minute}, st,
		map[string]outbox.Deliverer{"ledger": s, "acks": s}, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
	go func() { r.Run(ctx); stopped <- struct{}{} }()
	go func() { st.Listen(ctx, r.Wake, nil); stopped <- struct{}{} }()
	time.Sleep(300 * time.Millisecond) // both workers idle, the listener up
	if _, err := storetest.IngestNow(t, st, "n.835", storetest.Fixture(t, "835_canonical.x12")); err != nil {
		t.Fatal(err)
	}
	committed := time.Now()
	select {
	case at := <-delivered:
		t.Logf("commit to POST: %s", at.Sub(committed))
		if at.Sub(committed) > time.Second {
			t.Errorf("delivered %s after commit", at.Sub(committed))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not delivered: the notification did not wake the relay")
	}
}
