package outbox_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

func TestClassify410IsGone(t *testing.T) {
	if r := sink.Classify(http.StatusGone, "", nil, time.Now()); r.Outcome != sink.Gone || r.Err != "HTTP 410 Gone" {
		t.Errorf("410: %v %q, want gone", r.Outcome, r.Err)
	}
}

// sinkFixture is a store with files 835s ingested (a payment for sink
// "ledger" and a 999 for sink "acks" each), a ledger receiver answering
// what status holds and an acks receiver answering 200.
type sinkFixture struct {
	st     store.Store
	ledger *receiver
	acks   *receiver
	mu     sync.Mutex
	status int
	files  int
}

func newSinkFixture(t *testing.T, st store.Store, files, status int) *sinkFixture {
	f := &sinkFixture{st: st, status: status}
	f.ledger = newReceiver(t, func(int) (int, http.Header) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.status, nil
	})
	f.acks = newReceiver(t, func(int) (int, http.Header) { return 200, nil })
	f.ingest(t, files)
	return f
}

func (f *sinkFixture) ingest(t *testing.T, n int) {
	for range n {
		var b bytes.Buffer
		x12gen.Remit{Control: 700 + f.files, Trace: fmt.Sprintf("GONE%d-", f.files)}.Write(&b)
		ingestNow(t, f.st, fmt.Sprintf("g%d.835", f.files), b.Bytes())
		f.files++
	}
}

func (f *sinkFixture) setStatus(s int) {
	f.mu.Lock()
	f.status = s
	f.mu.Unlock()
}

// relay is another relay over the fixture's store: a replica, or this
// process after a restart.
func (f *sinkFixture) relay(t *testing.T, workers int, m *metrics.Metrics) *outbox.Relay {
	ls, err := sink.New(sink.Config{Name: "ledger", URL: f.ledger.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	as, _ := sink.New(sink.Config{Name: "acks", URL: f.acks.URL})
	return outbox.NewRelay(outbox.RelayConfig{Workers: workers, Idle: 20 * time.Millisecond}, f.st,
		map[string]outbox.Deliverer{"ledger": ls, "acks": as}, zap.NewNop(), m)
}

// stats returns the outbox counts of sink.
func (f *sinkFixture) stats(name string) outbox.SinkStats {
	stats, _ := f.st.Stats(context.Background(), time.Now().UTC())
	for _, s := range stats {
		if s.Sink == name {
			return s
		}
	}
	return outbox.SinkStats{Sink: name}
}

// delivered counts the rows delivered at sink name (Activity's window
// from the epoch holds them all).
func (f *sinkFixture) delivered(name string) int {
	a, _ := f.st.Activity(context.Background(), time.Unix(0, 0))
	return a.Delivered[name]
}

func (f *sinkFixture) state(name string) outbox.SinkState {
	states, _ := f.st.SinkStates(context.Background())
	for _, s := range states {
		if s.Sink == name {
			return s
		}
	}
	return outbox.SinkState{Sink: name}
}

// ledgerRows returns the rows of sink ledger.
func (f *sinkFixture) ledgerRows(t *testing.T) []outbox.Row {
	var out []outbox.Row
	for id := int64(1); id < 100; id++ {
		if r, err := f.st.GetOutbox(context.Background(), id); err == nil && r.Sink == "ledger" {
			out = append(out, r)
		}
	}
	return out
}

// gaugesUntil runs the maintenance gauges on m until m's
// ediwatch_sink_disabled of sink reads want.
func gaugesUntil(t *testing.T, st store.Store, m *metrics.Metrics, sinkName string, want float64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g := &outbox.Gauges{Store: st, States: st, Metrics: m, Log: zap.NewNop(), Every: 10 * time.Millisecond,
		Divergent: func(context.Context, time.Time) (bool, error) { return false, nil }}
	stopped := make(chan struct{})
	go func() { g.Run(ctx); close(stopped) }()
	deadline := time.Now().Add(time.Minute) // a hang guard, not a timing assertion
	for testutil.ToFloat64(m.SinkDisabled.WithLabelValues(sinkName)) != want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-stopped
	if got := testutil.ToFloat64(m.SinkDisabled.WithLabelValues(sinkName)); got != want {
		t.Fatalf("ediwatch_sink_disabled{sink=%q} = %v from the store, want %v", sinkName, got, want)
	}
}

// TestGoneDisablesTheSink: a receiver answering 410 Gone disables its sink
// after one request: no further request reaches it, from this relay, from
// another replica or after a restart; its rows stay pending with no
// attempt burnt, while the other sink keeps delivering; the disabled state
// and ediwatch_sink_disabled come from the store. Enabling the sink (its
// receiver now answers 200) delivers every row that waited, each once.
func TestGoneDisablesTheSink(t *testing.T) {
	drivers(t, func(t *testing.T, st store.Store) {
		const files = 3
		f := newSinkFixture(t, st, files, http.StatusGone)
		m := metrics.New(prometheus.NewRegistry())
		m.Init(nil, []string{"ledger", "acks"})
		// One worker: every ledger row is claimed in its first batch, so
		// the rows after the 410 are given back, not sent.
		runUntil(t, f.relay(t, 1, m), func() bool {
			return f.delivered("acks") == files && f.state("ledger").Disabled
		})
		if n := len(f.ledger.got()); n != 1 {
			t.Errorf("the gone receiver got %d requests, want 1", n)
		}
		if s := f.state("ledger"); s.Reason != outbox.GoneReason || s.By != "relay" || s.Since.IsZero() {
			t.Errorf("state %+v, want disabled by the relay for %q", s, outbox.GoneReason)
		}
		rows := f.ledgerRows(t)
		if len(rows) != files {
			t.Fatalf("%d ledger rows, want %d", len(rows), files)
		}
		gone := 0
		for _, r := range rows {
			if r.Status != outbox.StatusPending || r.Attempts != 0 {
				t.Errorf("ledger row %d: %s after %d attempts, want pending with no attempt counted", r.ID, r.Status, r.Attempts)
			}
			// The 410 was a request: it is in its row's history (numbered
			// as claimed, though not counted); the rows given back unsent
			// have none.
			h, err := st.Attempts(context.Background(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range h {
				if a.HTTPStatus != http.StatusGone || a.Class != "4xx" || a.Number != 1 {
					t.Errorf("ledger row %d: attempt %+v, want the 410 as attempt 1", r.ID, a)
				}
			}
			gone += len(h)
		}
		if gone != 1 {
			t.Errorf("%d attempts in the ledger rows' histories, want the one 410", gone)
		}
		if got := testutil.ToFloat64(m.SinkDisabled.WithLabelValues("ledger")); got != 1 {
			t.Errorf("ediwatch_sink_disabled{sink=ledger} = %v at once on the 410, want 1", got)
		}
		if got := testutil.ToFloat64(m.Deliveries.WithLabelValues("ledger", "gone")); got != 1 {
			t.Errorf("gone deliveries = %v, want 1", got)
		}

		// Another replica, or this one restarted, never claims the
		// disabled sink's rows, old or new, and delivers the rest.
		f.ingest(t, 1)
		runUntil(t, f.relay(t, 2, metrics.New(prometheus.NewRegistry())), func() bool {
			return f.delivered("acks") == files+1
		})
		if n := len(f.ledger.got()); n != 1 {
			t.Errorf("after another replica ran, the gone receiver got %d requests, want 1", n)
		}
		// A replica that never saw the 410 exports it from the store.
		other := metrics.New(prometheus.NewRegistry())
		other.Init(nil, []string{"ledger", "acks"})
		gaugesUntil(t, st, other, "ledger", 1)

		f.setStatus(http.StatusOK)
		if changed, err := st.EnableSink(context.Background(), "ledger", time.Now().UTC()); err != nil || !changed {
			t.Fatalf("enable: %v %v", changed, err)
		}
		runUntil(t, f.relay(t, 2, metrics.New(prometheus.NewRegistry())), func() bool {
			return f.delivered("ledger") == files+1
		})
		seen := map[string]int{}
		for _, r := range f.ledger.got()[1:] {
			seen[r.header.Get("Idempotency-Key")]++
		}
		for _, r := range f.ledgerRows(t) {
			if seen[r.EffectKey] != 1 || r.Status != outbox.StatusDelivered {
				t.Errorf("row %d: %s, delivered %d times after the enable, want once", r.ID, r.Status, seen[r.EffectKey])
			}
		}
		gaugesUntil(t, st, other, "ledger", 0)
	})
}

// TestDisabledSinkWaitsPastMaxAge: a sink disabled by hand gets no
// request; its row waits pending past relay.max_age, and enabling the sink
// delivers it (the age budget restarts at the enable) instead of
// dead-lettering it.
func TestDisabledSinkWaitsPastMaxAge(t *testing.T) {
	drivers(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		if _, err := storetest.Ingest(t, st, "a.835", storetest.Fixture(t, "835_canonical.x12")); err != nil {
			t.Fatal(err)
		}
		f := &sinkFixture{st: st, status: http.StatusOK}
		f.ledger = newReceiver(t, func(int) (int, http.Header) { return 200, nil })
		f.acks = newReceiver(t, func(int) (int, http.Header) { return 200, nil })
		r := f.relay(t, 1, metrics.New(prometheus.NewRegistry()))
		clock := time.Date(2026, 11, 30, 12, 0, 1, 0, time.UTC) // rows are stamped at noon
		r.SetClock(func() time.Time { return clock })
		if changed, err := st.DisableSink(ctx, "ledger", "receiver migration", "operator", clock, clock); err != nil || !changed {
			t.Fatalf("disable: %v %v", changed, err)
		}
		for range 3 {
			clock = clock.Add(40 * time.Hour) // past the default max_age of 72h
			if _, err := r.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(f.ledger.got()); n != 0 || f.delivered("acks") != 1 {
			t.Fatalf("the disabled sink got %d requests, acks delivered %d", n, f.delivered("acks"))
		}
		if rows := f.ledgerRows(t); len(rows) != 1 || rows[0].Status != outbox.StatusPending || rows[0].Attempts != 0 {
			t.Fatalf("ledger rows %v, want one pending, no attempt", rows)
		}
		if changed, err := st.EnableSink(ctx, "ledger", clock); err != nil || !changed {
			t.Fatalf("enable: %v %v", changed, err)
		}
		if _, err := r.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if rows := f.ledgerRows(t); len(f.ledger.got()) != 1 || rows[0].Status != outbox.StatusDelivered {
			t.Errorf("after the enable: %d requests, row %s (%s)", len(f.ledger.got()), rows[0].Status, rows[0].LastError)
		}
	})
}

// TestRelayParksRowsOfDisabledSink: rows that arrive for a disabled sink
// are parked by the relays' lease reaper, so claims stop walking past
// them; the other sink keeps delivering.
func TestRelayParksRowsOfDisabledSink(t *testing.T) {
	drivers(t, func(t *testing.T, st store.Store) {
		if _, err := st.DisableSink(context.Background(), "ledger", "by hand", "operator", time.Now().UTC(), time.Now().UTC()); err != nil {
			t.Fatal(err)
		}
		f := newSinkFixture(t, st, 2, http.StatusOK)
		ls, _ := sink.New(sink.Config{Name: "ledger", URL: f.ledger.URL})
		as, _ := sink.New(sink.Config{Name: "acks", URL: f.acks.URL})
		// A 2s lease: the reaper (and so the parking) runs every second.
		r := outbox.NewRelay(outbox.RelayConfig{Workers: 1, Idle: 20 * time.Millisecond, Lease: 2 * time.Second}, st,
			map[string]outbox.Deliverer{"ledger": ls, "acks": as}, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
		parked := func() bool {
			rows := f.ledgerRows(t)
			for _, r := range rows {
				if r.NextAttemptAt.Year() != 9999 || r.Status != outbox.StatusPending {
					return false
				}
			}
			return len(rows) == 2
		}
		runUntil(t, r, func() bool { return f.delivered("acks") == 2 && parked() })
		if n := len(f.ledger.got()); n != 0 {
			t.Errorf("the disabled sink got %d requests", n)
		}
	})
}
