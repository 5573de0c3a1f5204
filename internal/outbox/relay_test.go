package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
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
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// receiver is a real HTTP server that answers from a script and records
// every request.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*recorded
	answer   func(n int) (int, http.Header)
}

type recorded struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, answer func(n int) (int, http.Header)) *receiver {
	rc := &receiver{answer: answer}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.requests = append(rc.requests, &recorded{header: r.Header.Clone(), body: body})
		n := len(rc.requests)
		rc.mu.Unlock()
		status, h := rc.answer(n)
		for k, v := range h {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		io.WriteString(w, "receiver says "+http.StatusText(status))
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) got() []*recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*recorded(nil), rc.requests...)
}

// verifySignature checks a Standard Webhooks signature with sink.Verify
// (itself checked against the specification's test vector in package sink).
func verifySignature(t *testing.T, r *recorded) {
	t.Helper()
	if !sink.Verify(secret, r.header, r.body) {
		t.Errorf("no valid signature in %q", r.header.Get("webhook-signature"))
	}
}

type harness struct {
	st    store.Store
	r     *outbox.Relay
	m     *metrics.Metrics
	clock time.Time
	ok    *receiver
}

// newHarness ingests one 835 (a payment for sink "ledger" and a 999 for
// sink "acks") and builds a relay whose ledger sink is ledger.
func newHarness(t *testing.T, ledger *receiver, cfg outbox.RelayConfig) *harness {
	st := drivertest.SQLite(t)
	if _, err := storetest.Ingest(t, st, "a.835", storetest.Fixture(t, "835_canonical.x12")); err != nil {
		t.Fatal(err)
	}
	// Rows are stamped at the suite's fixed time (noon, 2026-11-30).
	h := &harness{st: st, clock: time.Date(2026, 11, 30, 12, 0, 1, 0, time.UTC), m: metrics.New(prometheus.NewRegistry())}
	h.ok = newReceiver(t, func(int) (int, http.Header) { return 200, nil })
	ls, err := sink.New(sink.Config{Name: "ledger", URL: ledger.URL, Secrets: []string{secret}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	as, _ := sink.New(sink.Config{Name: "acks", URL: h.ok.URL, Raw: true})
	cfg.BackoffBase, cfg.BackoffMax = time.Second, time.Minute
	h.r = outbox.NewRelay(cfg, st, map[string]outbox.Deliverer{"ledger": ls, "acks": as}, zap.NewNop(), h.m)
	h.r.SetClock(func() time.Time { return h.clock })
	return h
}

// round claims and delivers what is due, then moves the clock an hour on.
func (h *harness) round(t *testing.T) int {
	t.Helper()
	n, err := h.r.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h.clock = h.clock.Add(time.Hour)
	return n
}

func (h *harness) payment(t *testing.T) outbox.Row {
	rows, _ := h.st.ListDead(context.Background(), outbox.DeadFilter{Sink: "ledger"}, 10)
	if len(rows) == 1 {
		return rows[0]
	}
	for id := int64(1); id < 5; id++ {
		if r, err := h.st.GetOutbox(context.Background(), id); err == nil && r.Kind == "payment.posted" {
			return r
		}
	}
	t.Fatal("no payment row")
	return outbox.Row{}
}

// brief prints a row without its payload (which holds patient data).
func brief(r outbox.Row) string {
	return fmt.Sprintf("{id %d %s status %s attempts %d last %d %q next %s}", r.ID, r.EffectKey, r.Status, r.Attempts,
		r.LastStatus, r.LastError, r.NextAttemptAt.Format(time.RFC3339))
}

// Test500ThreeTimesThen200: delivered once after four requests, every one
// with the same Idempotency-Key and a valid signature.
func Test500ThreeTimesThen200(t *testing.T) {
	rc := newReceiver(t, func(n int) (int, http.Header) {
		if n <= 3 {
			return 500, nil
		}
		return 200, nil
	})
	h := newHarness(t, rc, outbox.RelayConfig{})
	for range 6 {
		h.round(t)
	}
	reqs := rc.got()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	for _, r := range reqs {
		if r.header.Get("Idempotency-Key") != "payment:1512345678:EFT0001" || r.header.Get("webhook-id") != "payment:1512345678:EFT0001" {
			t.Errorf("keys %q %q", r.header.Get("Idempotency-Key"), r.header.Get("webhook-id"))
		}
		verifySignature(t, r)
		if !strings.HasPrefix(r.header.Get("traceparent"), "00-") || r.header.Get("X-Correlation-ID") == "" {
			t.Errorf("trace headers %v", r.header)
		}
		var ev map[string]any
		if err := json.Unmarshal(r.body, &ev); err != nil || ev["specversion"] != "1.0" || ev["type"] != "ediwatch.payment.posted" ||
			ev["id"] != "payment:1512345678:EFT0001" || ev["data"] == nil {
			t.Errorf("CloudEvent %s (%v)", r.body, err)
		}
	}
	if tp := reqs[0].header.Get("traceparent"); tp[:36] != reqs[3].header.Get("traceparent")[:36] {
		t.Error("the trace id changed between attempts of one effect")
	}
	p := h.payment(t)
	if p.Status != outbox.StatusDelivered || p.Attempts != 4 || p.LastStatus != 200 {
		t.Errorf("row %s", brief(p))
	}
	// The 999 went raw to the ack sink.
	if acks := h.ok.got(); len(acks) != 1 || acks[0].header.Get("Content-Type") != "application/edi-x12" ||
		!strings.HasPrefix(string(acks[0].body), "ISA*") {
		t.Errorf("ack delivery: %d", len(acks))
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	rc := newReceiver(t, func(n int) (int, http.Header) {
		if n == 1 {
			return 429, http.Header{"Retry-After": {"7200"}}
		}
		return 200, nil
	})
	h := newHarness(t, rc, outbox.RelayConfig{})
	start := h.clock
	h.r.RunOnce(context.Background())
	p := h.payment(t)
	if p.Status != outbox.StatusPending || p.NextAttemptAt.Before(start.Add(2*time.Hour)) || p.LastStatus != 429 {
		t.Fatalf("after 429: %s (next attempt %s after)", brief(p), p.NextAttemptAt.Sub(start))
	}
	h.clock = start.Add(119 * time.Minute)
	h.r.RunOnce(context.Background())
	if len(rc.got()) != 1 {
		t.Fatal("retried before Retry-After")
	}
	h.clock = start.Add(121 * time.Minute)
	h.r.RunOnce(context.Background())
	if len(rc.got()) != 2 || h.payment(t).Status != outbox.StatusDelivered {
		t.Errorf("not delivered after Retry-After")
	}
}

func Test400IsDeadAtOnce(t *testing.T) {
	rc := newReceiver(t, func(int) (int, http.Header) { return 400, nil })
	h := newHarness(t, rc, outbox.RelayConfig{})
	for range 3 {
		h.round(t)
	}
	p := h.payment(t)
	if len(rc.got()) != 1 || p.Status != outbox.StatusDead || p.LastStatus != 400 ||
		p.LastError != "HTTP 400 Bad Request" || p.LastResponse != "receiver says Bad Request" {
		t.Errorf("%d requests, row %s", len(rc.got()), brief(p))
	}
}

func TestMaxAttemptsDeadLetters(t *testing.T) {
	rc := newReceiver(t, func(int) (int, http.Header) { return 503, nil })
	h := newHarness(t, rc, outbox.RelayConfig{MaxAttempts: 3, BreakerFailures: 100})
	for range 6 {
		h.round(t)
	}
	p := h.payment(t)
	if len(rc.got()) != 3 || p.Status != outbox.StatusDead || !strings.Contains(p.LastError, "max_attempts (3) exhausted") {
		t.Errorf("%d requests, %s", len(rc.got()), brief(p))
	}
}

// TestOutageOutlastingTheAttemptsEndsByMaxAge: a receiver down longer
// than max_attempts' reach (a weekend: with the defaults, 25 attempts
// are spent in about seven hours) does not dead-letter its rows by
// attempts. Once the breaker opens, each retry is its half-open trial,
// which fails without spending the row's max_attempts; the row ends by
// max_age, and is delivered if the receiver returns before it.
func TestOutageOutlastingTheAttemptsEndsByMaxAge(t *testing.T) {
	var mu sync.Mutex
	down := true
	rc := newReceiver(t, func(int) (int, http.Header) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return 503, nil
		}
		return 200, nil
	})
	const cooldown = time.Millisecond // real time; each round moves the relay's clock an hour
	h := newHarness(t, rc, outbox.RelayConfig{MaxAttempts: 3, BreakerFailures: 2, BreakerTimeout: cooldown,
		MaxAge: 72 * time.Hour})
	for range 12 { // twelve hours of outage
		time.Sleep(5 * cooldown) // the breaker half-opens
		h.round(t)
	}
	p := h.payment(t)
	if p.Status != outbox.StatusPending || p.Attempts <= 3 {
		t.Fatalf("after a 12-hour outage: %s, %d requests (want pending, past max_attempts by failed trials)",
			brief(p), len(rc.got()))
	}
	mu.Lock()
	down = false
	mu.Unlock()
	time.Sleep(5 * cooldown)
	h.round(t)
	if p := h.payment(t); p.Status != outbox.StatusDelivered {
		t.Errorf("after the receiver came back: %s", brief(p))
	}
}

// TestBreakerOpensWithoutBurningAttempts: while the sink is down the
// breaker opens and rows wait without attempts being counted; delivery
// resumes when the sink is back.
func TestBreakerOpensWithoutBurningAttempts(t *testing.T) {
	var mu sync.Mutex
	down := true
	rc := newReceiver(t, func(int) (int, http.Header) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return 503, nil
		}
		return 200, nil
	})
	// The breaker's cooldown runs on the real clock: long enough that the
	// rounds after it opens (well under a second, even under -race on a
	// busy machine) all fall inside it.
	const cooldown = 2 * time.Second
	h := newHarness(t, rc, outbox.RelayConfig{BreakerFailures: 3, BreakerTimeout: cooldown, MaxAttempts: 10})
	for range 6 {
		h.round(t)
	}
	if n := len(rc.got()); n != 3 {
		t.Fatalf("%d requests reached a sink whose breaker should be open after 3", n)
	}
	if p := h.payment(t); p.Attempts != 3 || p.Status != outbox.StatusPending {
		t.Errorf("attempts burned while the breaker was open: %s", brief(p))
	}
	if got := testutil.ToFloat64(h.m.BreakerState.WithLabelValues("ledger")); got != 2 {
		t.Errorf("breaker state metric %v, want 2 (open)", got)
	}
	mu.Lock()
	down = false
	mu.Unlock()
	time.Sleep(cooldown + 50*time.Millisecond) // the breaker half-opens
	h.round(t)
	if p := h.payment(t); p.Status != outbox.StatusDelivered || p.Attempts != 4 {
		t.Errorf("after recovery: %s", brief(p))
	}
	if got := testutil.ToFloat64(h.m.BreakerState.WithLabelValues("ledger")); got != 0 {
		t.Errorf("breaker state metric %v, want 0 (closed)", got)
	}
}

func TestReplayDeliversWithTheSameKey(t *testing.T) {
	var mu sync.Mutex
	status := 422
	rc := newReceiver(t, func(int) (int, http.Header) {
		mu.Lock()
		defer mu.Unlock()
		return status, nil
	})
	h := newHarness(t, rc, outbox.RelayConfig{})
	h.round(t)
	p := h.payment(t)
	if p.Status != outbox.StatusDead {
		t.Fatalf("%s", brief(p))
	}
	mu.Lock()
	status = 200
	mu.Unlock()
	if n, err := h.st.Replay(context.Background(), outbox.DeadFilter{IDs: []int64{p.ID}}, h.clock); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	h.round(t)
	reqs := rc.got()
	if len(reqs) != 2 || reqs[1].header.Get("Idempotency-Key") != reqs[0].header.Get("Idempotency-Key") ||
		h.payment(t).Status != outbox.StatusDelivered {
		t.Errorf("replay: %d requests", len(reqs))
	}
}

func TestClassify(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		status int
		after  string
		want   sink.Outcome
		wait   time.Duration
	}{
		{200, "", sink.Delivered, 0}, {204, "", sink.Delivered, 0}, {409, "", sink.Retry, 0},
		{408, "", sink.Retry, 0}, {425, "", sink.Retry, 0}, {429, "30", sink.Retry, 30 * time.Second},
		{503, "Mon, 30 Nov 2026 12:05:00 GMT", sink.Retry, 5 * time.Minute}, {500, "", sink.Retry, 0},
		{400, "", sink.Dead, 0}, {401, "", sink.Dead, 0}, {404, "", sink.Dead, 0}, {422, "", sink.Dead, 0},
	} {
		r := sink.Classify(tc.status, tc.after, []byte("x"), now)
		if r.Outcome != tc.want || r.RetryAfter != tc.wait {
			t.Errorf("%d %q: %v %s", tc.status, tc.after, r.Outcome, r.RetryAfter)
		}
	}
}

// attemptsSeen is a sink that fails twice, then delivers, noting the
// attempt number each message carries.
type attemptsSeen struct {
	mu   sync.Mutex
	seen []int
}

func (a *attemptsSeen) Deliver(_ context.Context, msg sink.Message, _ time.Time) sink.Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, msg.Attempt)
	if len(a.seen) < 3 {
		return sink.Result{Outcome: sink.Retry, Err: "not yet"}
	}
	return sink.Result{Outcome: sink.Delivered}
}

// TestMessageCarriesTheAttemptNumber: a sink learns which attempt of the
// row it makes (the SFTP sink names its temporary file by it), counted
// by the store.
func TestMessageCarriesTheAttemptNumber(t *testing.T) {
	h := newHarness(t, newReceiver(t, func(int) (int, http.Header) { return 200, nil }), outbox.RelayConfig{})
	ledger := &attemptsSeen{}
	h.r = outbox.NewRelay(outbox.RelayConfig{BackoffBase: time.Second, BackoffMax: time.Minute}, h.st,
		map[string]outbox.Deliverer{"ledger": ledger, "acks": &attemptsSeen{seen: []int{0, 0}}}, zap.NewNop(), h.m)
	h.r.SetClock(func() time.Time { return h.clock })
	for range 5 {
		h.round(t)
	}
	if !slices.Equal(ledger.seen, []int{1, 2, 3}) {
		t.Errorf("attempt numbers %v, want [1 2 3]", ledger.seen)
	}
	if p := h.payment(t); p.Status != outbox.StatusDelivered || p.Attempts != 3 {
		t.Errorf("row %s", brief(p))
	}
}
