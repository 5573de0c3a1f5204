package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestBreakerPerSinkOpensAfterItsOwnFailures: two sinks, both down, with
// breakers of their own (ledger opens after 2 failures and cools down for
// 300ms, acks after 4 and for an hour): each sink gets exactly its own
// number of requests before its breaker opens; once both are back, the
// ledger's breaker half-opens after its cooldown and delivers while the
// acks' stays open and sends nothing.
func TestBreakerPerSinkOpensAfterItsOwnFailures(t *testing.T) {
	var mu sync.Mutex
	down := true
	answer := func(int) (int, http.Header) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	}
	ledger, acks := newReceiver(t, answer), newReceiver(t, answer)
	// The breakers run on the real clock: the ledger's cooldown is long
	// enough that eight rounds usually fit in it, and the count is checked
	// strictly only when they did (a loaded machine may let the cooldown
	// pass and one half-open trial through, which must then fail and
	// reopen the breaker).
	const cooldown = time.Second
	h := newTwoSinkHarness(t, ledger, acks, outbox.RelayConfig{MaxAttempts: 20, Sinks: map[string]outbox.SinkLimits{
		"ledger": {BreakerFailures: 2, BreakerCooldown: cooldown},
		"acks":   {BreakerFailures: 4, BreakerCooldown: time.Hour},
	}})
	var opened time.Time // the start of the round that made the ledger's second request
	for range 8 {
		start := time.Now()
		h.round(t)
		if opened.IsZero() && len(ledger.got()) >= 2 {
			opened = start
		}
	}
	l, a := len(ledger.got()), len(acks.got())
	if a != 4 || l < 2 || l > 3 || (l != 2 && time.Since(opened) < cooldown) {
		t.Fatalf("requests before the breakers opened: ledger %d (want 2, or 3 once its cooldown passed), acks %d (want 4)", l, a)
	}
	for _, name := range []string{"ledger", "acks"} {
		if got := testutil.ToFloat64(h.m.BreakerState.WithLabelValues(name)); got != 2 {
			t.Errorf("%s breaker state %v, want 2 (open)", name, got)
		}
	}
	mu.Lock()
	down = false
	mu.Unlock()
	time.Sleep(cooldown + 50*time.Millisecond) // past the ledger's cooldown, far from the acks'
	h.round(t)
	h.round(t)
	if p := h.payment(t); p.Status != outbox.StatusDelivered || p.Attempts != l+1 {
		t.Errorf("ledger after its cooldown: %s, want delivered at attempt %d", brief(p), l+1)
	}
	if got := testutil.ToFloat64(h.m.BreakerState.WithLabelValues("ledger")); got != 0 {
		t.Errorf("ledger breaker state %v, want 0 (closed)", got)
	}
	if a := len(acks.got()); a != 4 {
		t.Errorf("acks got %d requests while its breaker should stay open for an hour", a)
	}
	if got := testutil.ToFloat64(h.m.BreakerState.WithLabelValues("acks")); got != 2 {
		t.Errorf("acks breaker state %v, want 2 (open)", got)
	}
}

// newTwoSinkHarness is newHarness with the acks sink (raw) at acks too.
func newTwoSinkHarness(t *testing.T, ledger, acks *receiver, cfg outbox.RelayConfig) *harness {
	h := newHarness(t, ledger, cfg)
	ls, _ := sink.New(sink.Config{Name: "ledger", URL: ledger.URL, Timeout: 5 * time.Second})
	as, _ := sink.New(sink.Config{Name: "acks", URL: acks.URL, Raw: true, Timeout: 5 * time.Second})
	cfg.BackoffBase, cfg.BackoffMax = time.Second, time.Minute
	h.r = outbox.NewRelay(cfg, h.st, map[string]outbox.Deliverer{"ledger": ls, "acks": as}, zap.NewNop(), h.m)
	h.r.SetClock(func() time.Time { return h.clock })
	return h
}

// counting is a receiver that answers 200 and lets see run on every
// request before the answer (under no lock of its own).
func counting(t *testing.T, see func(r *http.Request)) *receiver {
	rc := &receiver{answer: func(int) (int, http.Header) { return 200, nil }}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		see(r)
		rc.mu.Lock()
		rc.requests = append(rc.requests, &recorded{header: r.Header.Clone()})
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	return rc
}

// ingestPayments ingests one 835 with n payments (sink ledger, each its
// own ordering key) and its 999 (sink acks).
func ingestPayments(t *testing.T, st store.Store, n int) {
	var b bytes.Buffer
	x12gen.Remit{Control: 900, SetsPerGroup: n, Trace: "LIMIT"}.Write(&b)
	ingestNow(t, st, "limits.835", b.Bytes())
}

// TestConcurrencyCapsRequestsInFlight: eight workers each claiming one
// row at a time deliver 12 payments to a receiver that holds every request
// for a while and counts those in flight; with concurrency 2 it never sees
// more than 2 at once, and every payment is delivered.
func TestConcurrencyCapsRequestsInFlight(t *testing.T) {
	drivers(t, func(t *testing.T, st store.Store) {
		const payments, limit = 12, 2
		var mu sync.Mutex
		var inFlight, most, served int
		rc := counting(t, func(r *http.Request) {
			// Every payment request is held 50ms while it counts as in
			// flight; the 999 (the unlimited acks sink) is not counted.
			if !strings.HasPrefix(r.Header.Get("Idempotency-Key"), "payment:") {
				return
			}
			mu.Lock()
			inFlight++
			served++
			most = max(most, inFlight)
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
			mu.Lock()
			inFlight--
			mu.Unlock()
		})
		ingestPayments(t, st, payments)
		s, _ := sink.New(sink.Config{Name: "ledger", URL: rc.URL, Timeout: 5 * time.Second})
		r := outbox.NewRelay(outbox.RelayConfig{Workers: 8, Batch: 1, Idle: 10 * time.Millisecond,
			Sinks: map[string]outbox.SinkLimits{"ledger": {Concurrency: limit}}},
			st, map[string]outbox.Deliverer{"ledger": s, "acks": s}, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
		runUntil(t, r, func() bool {
			c, _ := st.Counts(context.Background())
			return c.Outbox[outbox.StatusDelivered] == payments+1
		})
		mu.Lock()
		defer mu.Unlock()
		if most > limit || most < 1 {
			t.Errorf("the receiver saw %d requests in flight at once; concurrency is %d", most, limit)
		}
		t.Logf("at most %d of %d requests in flight", most, served)
	})
}

// TestRateLimitCapsRequests: eight workers deliver 15 payments to a sink
// with rate_limit 20 (requests per second, a burst of one). A token bucket
// created at start grants at most 1 + 20*(t-start) tokens by time t, and a
// request reaches the receiver only after its token was granted; so the
// k-th payment request the receiver records at time t_k must satisfy
// k <= 1 + 20*(t_k - start). Without the limit all 15 arrive within a few
// milliseconds and break the bound.
func TestRateLimitCapsRequests(t *testing.T) {
	const payments, perSecond = 15, 20.0
	var mu sync.Mutex
	var arrivals []time.Time
	rc := counting(t, func(r *http.Request) {
		if strings.HasPrefix(r.Header.Get("Idempotency-Key"), "payment:") {
			mu.Lock()
			arrivals = append(arrivals, time.Now())
			mu.Unlock()
		}
	})
	st := drivertest.SQLite(t)
	ingestPayments(t, st, payments)
	start := time.Now() // before the limiter exists
	s, _ := sink.New(sink.Config{Name: "ledger", URL: rc.URL, Timeout: 5 * time.Second})
	r := outbox.NewRelay(outbox.RelayConfig{Workers: 8, Batch: 1, Idle: 10 * time.Millisecond,
		Sinks: map[string]outbox.SinkLimits{"ledger": {RateLimit: perSecond}}},
		st, map[string]outbox.Deliverer{"ledger": s, "acks": s}, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
	runUntil(t, r, func() bool {
		c, _ := st.Counts(context.Background())
		return c.Outbox[outbox.StatusDelivered] == payments+1
	})
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != payments {
		t.Fatalf("%d payment requests, want %d", len(arrivals), payments)
	}
	for i, at := range arrivals {
		k := float64(i + 1)
		if budget := 1 + perSecond*at.Sub(start).Seconds(); k > budget+1e-6 {
			t.Errorf("request %d arrived %s after start: more than the limiter's budget of %.2f", i+1, at.Sub(start), budget)
		}
	}
}

// TestRateLimitWaitKeepsTheLease: one worker's batch of 6 payments to a
// sink with rate_limit 4 takes well over a second while the lease is
// 300ms: the lease ticker extends the leases of the rows waiting for their
// token, so no lease is lost and a second worker, claiming meanwhile,
// never takes a waiting row; every payment is delivered once.
func TestRateLimitWaitKeepsTheLease(t *testing.T) {
	const payments = 6
	rc := newReceiver(t, func(int) (int, http.Header) { return 200, nil })
	st := drivertest.SQLite(t)
	ingestPayments(t, st, payments)
	m := metrics.New(prometheus.NewRegistry())
	s, _ := sink.New(sink.Config{Name: "ledger", URL: rc.URL, Timeout: 5 * time.Second})
	r := outbox.NewRelay(outbox.RelayConfig{Workers: 2, Lease: 300 * time.Millisecond, Idle: 10 * time.Millisecond,
		Sinks: map[string]outbox.SinkLimits{"ledger": {RateLimit: 4}}},
		st, map[string]outbox.Deliverer{"ledger": s, "acks": s}, zap.NewNop(), m)
	runUntil(t, r, func() bool {
		c, _ := st.Counts(context.Background())
		return c.Outbox[outbox.StatusDelivered] == payments+1
	})
	seen := map[string]int{}
	for _, req := range rc.got() {
		seen[req.header.Get("Idempotency-Key")]++
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s delivered %d times", k, n)
		}
	}
	if got := testutil.ToFloat64(m.LeaseLost); got != 0 {
		t.Errorf("%v leases lost while rows waited for the rate limit", got)
	}
}

// TestStoppingRelayGivesBackRowsWaitingForTheSink: rows waiting at a
// sink's gate when the relay stops are given back at once: pending, due
// now, with no attempt counted, and Run returns without waiting for the
// gate. For a concurrency slot, one worker's request is held by the
// receiver while the other worker waits for the only slot; the held
// request is let go after the stop and is recorded as delivered. For a
// rate-limit token (one per 0.95s), the worker waits for the second
// row's token when the relay stops (if the machine is slow it may not
// have reached the wait yet: the outcome is the same).
func TestStoppingRelayGivesBackRowsWaitingForTheSink(t *testing.T) {
	for _, tc := range []struct {
		name    string
		workers int
		limits  outbox.SinkLimits
	}{
		{"concurrency", 2, outbox.SinkLimits{Concurrency: 1}},
		{"rate_limit", 1, outbox.SinkLimits{RateLimit: 1.05}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const payments = 3
			ctx := context.Background()
			hold, arrived := make(chan struct{}), make(chan struct{}, 10)
			rc := counting(t, func(r *http.Request) {
				if strings.HasPrefix(r.Header.Get("Idempotency-Key"), "payment:") {
					arrived <- struct{}{}
					if tc.name == "concurrency" {
						<-hold
					}
				}
			})
			defer func() {
				select {
				case <-hold:
				default:
					close(hold)
				}
			}()
			st := drivertest.SQLite(t)
			ingestPayments(t, st, payments)
			s, _ := sink.New(sink.Config{Name: "ledger", URL: rc.URL, Timeout: 5 * time.Second})
			r := outbox.NewRelay(outbox.RelayConfig{Workers: tc.workers, Batch: 2, Idle: 10 * time.Millisecond,
				Sinks: map[string]outbox.SinkLimits{"ledger": tc.limits}},
				st, map[string]outbox.Deliverer{"ledger": s, "acks": s}, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
			rctx, cancel := context.WithCancel(ctx)
			stopped := make(chan struct{})
			go func() { r.Run(rctx); close(stopped) }()
			// Wait for the first payment request, then let the worker
			// (or the other worker) reach the next row's wait.
			select {
			case <-arrived:
			case <-time.After(time.Minute): // a hang guard
				t.Fatal("no payment request")
			}
			time.Sleep(100 * time.Millisecond)
			cancel()
			if tc.name == "concurrency" {
				close(hold) // the request in flight finishes and is recorded
			}
			select {
			case <-stopped:
			case <-time.After(30 * time.Second): // a hang guard
				t.Fatal("the relay did not stop while a row waited at its sink's gate")
			}
			sent := countPrefix(rc, "payment:")
			c, _ := st.Counts(ctx)
			if sent < 1 || c.Outbox[outbox.StatusInflight] != 0 || c.Outbox[outbox.StatusDelivered] < sent {
				t.Errorf("%d payment requests; outbox %v", sent, c.Outbox)
			}
			if tc.name == "concurrency" && sent != 1 {
				t.Errorf("%d payment requests with one slot held, want 1", sent)
			}
			var pending int
			for id := int64(1); id < 20; id++ {
				row, err := st.GetOutbox(ctx, id)
				if err != nil || row.Status != outbox.StatusPending {
					continue
				}
				pending++
				if row.Attempts != 0 || row.NextAttemptAt.After(time.Now()) {
					t.Errorf("row given back with %s", brief(row))
				}
			}
			if pending == 0 {
				t.Error("no row was given back")
			}
		})
	}
}

func countPrefix(rc *receiver, prefix string) int {
	n := 0
	for _, r := range rc.got() {
		if strings.HasPrefix(r.header.Get("Idempotency-Key"), prefix) {
			n++
		}
	}
	return n
}

// TestRateLimitedSinkDoesNotHoldUpOtherSinks: one worker claims a batch
// whose first rows go to a sink allowing one request every 10s and the
// rest to an unlimited sink. The first limited row takes the token; the
// others are put off until their tokens are due (pending, no attempt
// counted) instead of holding the worker, so every payment is delivered
// while the limited sink has seen a single request.
func TestRateLimitedSinkDoesNotHoldUpOtherSinks(t *testing.T) {
	const payments, limited = 6, 3
	ctx := context.Background()
	var mu sync.Mutex
	var acksSeen, acksWhenPaid int
	var paid int
	rc := counting(t, func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(r.Header.Get("Idempotency-Key"), "payment:") {
			if paid++; paid == payments {
				acksWhenPaid = acksSeen
			}
		} else {
			acksSeen++
		}
	})
	st := drivertest.SQLite(t)
	ing, err := st.BeginIngest(ctx, inbox.FileInfo{Source: "test", Path: "acks", MTime: time.Now(), CorrelationID: "c",
		Now: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range limited {
		key := fmt.Sprintf("rl-%d", i)
		if err := ing.AddAck(ctx, outbox.Effect{Kind: "ack.999", Key: "ack999:" + key, OrderingKey: key, Sink: "acks",
			Payload: json.RawMessage(`{"x12":"ISA~"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ing.Commit(ctx, inbox.FileIngested, ""); err != nil {
		t.Fatal(err)
	}
	ingestPayments(t, st, payments)
	s, _ := sink.New(sink.Config{Name: "ledger", URL: rc.URL, Timeout: 5 * time.Second})
	r := outbox.NewRelay(outbox.RelayConfig{Workers: 1, Idle: 10 * time.Millisecond,
		Sinks: map[string]outbox.SinkLimits{"acks": {RateLimit: 0.1}}},
		st, map[string]outbox.Deliverer{"ledger": s, "acks": s}, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
	runUntil(t, r, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return paid == payments
	})
	mu.Lock()
	defer mu.Unlock()
	if acksWhenPaid != 1 {
		t.Errorf("the limited sink had %d requests when the last payment went out, want 1: its rows held up the rest",
			acksWhenPaid)
	}
	c, _ := st.Counts(ctx)
	if c.Outbox[outbox.StatusInflight] != 0 || c.Outbox[outbox.StatusPending] < limited {
		t.Errorf("outbox %v, want the limited sink's later rows pending", c.Outbox)
	}
	for id := int64(1); id <= limited; id++ {
		row, err := st.GetOutbox(ctx, id)
		if err == nil && row.Status == outbox.StatusPending && (row.Attempts != 0 || !row.NextAttemptAt.After(time.Now())) {
			t.Errorf("put-off row %s: want no attempt counted and due later", brief(row))
		}
	}
}
