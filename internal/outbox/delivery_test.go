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
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/store/storetest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// drivers runs fn against a fresh SQLite store and a fresh PostgreSQL store.
func drivers(t *testing.T, fn func(t *testing.T, st store.Store)) { drivertest.Each(t, fn) }

func ingestNow(t *testing.T, st store.Store, path string, data []byte) {
	t.Helper()
	if _, err := inbox.Ingest(context.Background(), inbox.Options{Store: st, Routes: storetest.Routes},
		inbox.FileInfo{Source: "test", Path: path, Size: int64(len(data)), MTime: time.Now(), SHA256: "sha-" + path,
			CorrelationID: store.NewCorrelationID(), Now: time.Now().UTC()}, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
}

// runUntil runs r until done reports true, then stops it and waits.
func runUntil(t *testing.T, r *outbox.Relay, done func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { r.Run(ctx); close(stopped) }()
	deadline := time.Now().Add(time.Minute) // a hang guard, not a timing assertion
	for !done() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-stopped
	if !done() {
		t.Fatal("the relay did not finish")
	}
}

// TestSlowReceiverDeliversEachEffectOnceInOrder: a batch slower than the
// relay lease (lease 1s, 250ms per request, batches of up to 16 rows, two
// workers) gets every effect exactly once, and the acknowledgments, which
// share an ordering key, in the order they were inserted. (With a 300ms
// lease a loaded machine's store writes could outlast the extensions'
// margin and a lapsed lease legitimately deliver a row twice.)
func TestSlowReceiverDeliversEachEffectOnceInOrder(t *testing.T) {
	drivers(t, func(t *testing.T, st store.Store) {
		var mu sync.Mutex
		var got []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			time.Sleep(250 * time.Millisecond)
			mu.Lock()
			got = append(got, r.Header.Get("Idempotency-Key"))
			mu.Unlock()
		}))
		defer srv.Close()
		const files = 4
		for i := range files {
			var b bytes.Buffer
			x12gen.Remit{Control: 500 + i, Trace: fmt.Sprintf("SLOW%d-", i)}.Write(&b)
			ingestNow(t, st, fmt.Sprintf("s%d.835", i), b.Bytes())
		}
		var acks []string // in insertion (id) order
		for id := int64(1); len(acks) < files && id < 100; id++ {
			if row, err := st.GetOutbox(context.Background(), id); err == nil && row.Kind == "ack.999" {
				acks = append(acks, row.EffectKey)
			}
		}
		s, _ := sink.New(sink.Config{Name: "ledger", URL: srv.URL, Timeout: 5 * time.Second})
		r := outbox.NewRelay(outbox.RelayConfig{Workers: 2, Lease: time.Second, Idle: 20 * time.Millisecond},
			st, map[string]outbox.Deliverer{"ledger": s, "acks": s}, zap.NewNop(), metrics.New(prometheus.NewRegistry()))
		runUntil(t, r, func() bool {
			c, _ := st.Counts(context.Background())
			return c.Outbox[outbox.StatusDelivered] == 2*files
		})
		mu.Lock()
		defer mu.Unlock()
		seen := map[string]int{}
		var ackOrder []string
		for _, k := range got {
			seen[k]++
			if strings.HasPrefix(k, "ack999:") {
				ackOrder = append(ackOrder, k)
			}
		}
		for k, n := range seen {
			if n != 1 {
				t.Errorf("%s delivered %d times", k, n)
			}
		}
		if len(seen) != 2*files || strings.Join(ackOrder, " ") != strings.Join(acks, " ") {
			t.Errorf("%d effects delivered; acks in order %v, want %v", len(seen), ackOrder, acks)
		}
	})
}

// Test409IsRetriedNotDelivered: a 409 (the receiver is still processing
// that Idempotency-Key) is retried with backoff; only the 2xx delivers.
func Test409IsRetriedNotDelivered(t *testing.T) {
	rc := newReceiver(t, func(n int) (int, http.Header) {
		if n == 1 {
			return http.StatusConflict, nil
		}
		return 200, nil
	})
	h := newHarness(t, rc, outbox.RelayConfig{})
	h.r.RunOnce(context.Background())
	if p := h.payment(t); p.Status != outbox.StatusPending || p.LastStatus != 409 || !p.NextAttemptAt.After(h.clock) {
		t.Fatalf("after 409: %s", brief(p))
	}
	h.round(t)
	h.round(t)
	if p := h.payment(t); len(rc.got()) != 2 || p.Status != outbox.StatusDelivered || p.LastStatus != 200 {
		t.Errorf("%d requests, %s", len(rc.got()), brief(p))
	}
}

// TestReplayAfterMaxAgeDelivers: rows dead through a weekend outage
// (longer than relay.max_age) are delivered by a replay, and keep their
// error history.
func TestReplayAfterMaxAgeDelivers(t *testing.T) {
	var mu sync.Mutex
	status := 400
	rc := newReceiver(t, func(int) (int, http.Header) {
		mu.Lock()
		defer mu.Unlock()
		return status, nil
	})
	h := newHarness(t, rc, outbox.RelayConfig{MaxAge: 72 * time.Hour})
	h.round(t)
	if p := h.payment(t); p.Status != outbox.StatusDead {
		t.Fatalf("%s", brief(p))
	}
	h.clock = h.clock.Add(80 * time.Hour) // the fix comes after max_age
	mu.Lock()
	status = 200
	mu.Unlock()
	if n, err := h.st.Replay(context.Background(), outbox.DeadFilter{}, h.clock); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	h.round(t)
	p := h.payment(t)
	if len(rc.got()) != 2 || p.Status != outbox.StatusDelivered || !strings.Contains(p.ErrorHistory, "HTTP 400") {
		t.Errorf("%d requests, %s, history %q", len(rc.got()), brief(p), p.ErrorHistory)
	}
}

// TestRowOfUnknownSinkStaysPending: during a rolling config change a row
// for a sink this replica lacks is left pending for a replica that has
// it, never dead-lettered.
func TestRowOfUnknownSinkStaysPending(t *testing.T) {
	rc := newReceiver(t, func(int) (int, http.Header) { return 200, nil })
	h := newHarness(t, rc, outbox.RelayConfig{})
	ctx := context.Background()
	ing, _ := h.st.BeginIngest(ctx, inbox.FileInfo{Source: "test", Path: "x", MTime: h.clock, CorrelationID: "c", Now: h.clock})
	if err := ing.AddAck(ctx, outbox.Effect{Kind: "ack.999", Key: "new", OrderingKey: "o", Sink: "archive", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ing.Commit(ctx, inbox.FileIngested, ""); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		h.round(t)
	}
	c, _ := h.st.Counts(ctx)
	if c.Outbox[outbox.StatusPending] != 1 || c.Outbox[outbox.StatusDead] != 0 || c.Outbox[outbox.StatusDelivered] != 2 {
		t.Errorf("outbox %v, want the archive row pending and the rest delivered", c.Outbox)
	}
}

// TestNoPatientDataInLogs: claims delivered to a receiver that echoes the
// payload, failing first and then refusing it: no log line holds a patient
// control number or any of the payload; the response is in the store.
func TestNoPatientDataInLogs(t *testing.T) {
	drivers(t, func(t *testing.T, st store.Store) {
		var n int
		var mu sync.Mutex
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if !strings.HasPrefix(r.Header.Get("Idempotency-Key"), "claim") {
				return // the 999
			}
			mu.Lock()
			n++
			first := n <= 2
			mu.Unlock()
			if first {
				w.WriteHeader(500)
			} else {
				w.WriteHeader(422)
			}
			w.Write(body) // receivers echo what they got
		}))
		defer srv.Close()
		var b bytes.Buffer
		x12gen.Claims{Control: 77, Claims: 2, IDPrefix: "PCN4471-"}.Write(&b)
		ingestNow(t, st, "c.x12", b.Bytes())
		core, logs := observer.New(zap.DebugLevel)
		s, _ := sink.New(sink.Config{Name: "ledger", URL: srv.URL, Timeout: 5 * time.Second})
		r := outbox.NewRelay(outbox.RelayConfig{Workers: 1, Idle: 10 * time.Millisecond, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond},
			st, map[string]outbox.Deliverer{"ledger": s, "acks": s}, zap.New(core), metrics.New(prometheus.NewRegistry()))
		runUntil(t, r, func() bool {
			c, _ := st.Counts(context.Background())
			return c.Outbox[outbox.StatusDead] == 2 && c.Outbox[outbox.StatusDelivered] == 1
		})
		var all strings.Builder
		for _, e := range logs.All() {
			all.WriteString(e.Message)
			for k, v := range e.ContextMap() {
				fmt.Fprintf(&all, " %s=%v", k, v)
			}
			all.WriteString("\n")
		}
		for _, phi := range []string{"PCN4471", "PATIENT", "MBR0", "99213"} {
			if strings.Contains(all.String(), phi) {
				t.Errorf("logs hold %q:\n%s", phi, all.String())
			}
		}
		if !strings.Contains(all.String(), "dead-lettered") || !strings.Contains(all.String(), "claim.received:sha256:") {
			t.Errorf("logs do not name the rows by digest:\n%s", all.String())
		}
		dead, _ := st.ListDead(context.Background(), outbox.DeadFilter{}, 10)
		for _, d := range dead {
			// The echoed event is kept in the store (its head: the
			// patient control number may lie past the kept excerpt).
			if strings.Contains(d.LastError, "PCN4471") || strings.Contains(d.LastError, "specversion") ||
				!strings.Contains(d.LastResponse, `"type":"ediwatch.claim.received"`) {
				t.Errorf("dead row: error %q, response %q", d.LastError, d.LastResponse)
			}
		}
	})
}

// TestRowWithLostLeaseIsNotDelivered: while the first row of a batch is in
// flight, another relay takes the batch's rows (their leases were reaped);
// the lease ticker learns it, and the rest of the batch is not delivered
// by the first relay.
func TestRowWithLostLeaseIsNotDelivered(t *testing.T) {
	var h *harness
	var stolen atomic.Int32
	rc := newReceiver(t, func(n int) (int, http.Header) {
		if n > 1 {
			return 200, nil
		}
		ctx := context.Background()
		later := h.clock.Add(2 * time.Hour)
		h.st.ReapExpired(ctx, later)
		rows, _ := h.st.Claim(ctx, later, nil, 10, time.Hour)
		stolen.Store(int32(len(rows)))
		// Answer once the first relay has learnt of the loss (a hang guard).
		for end := time.Now().Add(30 * time.Second); testutil.ToFloat64(h.m.LeaseLost) == 0 && time.Now().Before(end); {
			time.Sleep(5 * time.Millisecond)
		}
		return 200, nil
	})
	h = newHarness(t, rc, outbox.RelayConfig{Lease: 300 * time.Millisecond})
	if n, err := h.r.RunOnce(context.Background()); err != nil || n != 2 {
		t.Fatalf("handled %d rows: %v", n, err)
	}
	if stolen.Load() != 2 || len(h.ok.got()) != 0 {
		t.Errorf("%d rows taken by the other relay; %d acks delivered by the first after its lease was lost",
			stolen.Load(), len(h.ok.got()))
	}
	if got := testutil.ToFloat64(h.m.LeaseLost); got < 1 {
		t.Errorf("lease lost counted %v times", got)
	}
}
