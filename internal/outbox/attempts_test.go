package outbox_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/ediwatch/ediwatch/internal/metrics"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// rowOfKind returns the first outbox row of kind.
func rowOfKind(t *testing.T, st store.Store, kind string) outbox.Row {
	t.Helper()
	for id := int64(1); id < 100; id++ {
		if row, err := st.GetOutbox(context.Background(), id); err == nil && row.Kind == kind {
			return row
		}
	}
	t.Fatalf("no %s row", kind)
	return outbox.Row{}
}

// TestAttemptHistoryShowsWhatTheReceiverAnswered: real receivers answer a
// 503 with a large body and then a 200 (the ledger), or time out and then
// answer 204 (the acknowledgments): each row's attempt history and
// ediwatch_delivery_attempts_total{sink,class} show exactly that, with the
// response sizes the receivers sent, and the duration histogram has one
// observation per attempt.
func TestAttemptHistoryShowsWhatTheReceiverAnswered(t *testing.T) {
	drivers(t, func(t *testing.T, st store.Store) {
		busy := strings.Repeat("busy; ", 1000) // 6000 bytes
		var ledgerCalls, ackCalls atomic.Int32
		ledger := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			if ledgerCalls.Add(1) == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, busy)
				return
			}
			io.WriteString(w, `{"posted":true}`)
		}))
		defer ledger.Close()
		acks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			if ackCalls.Add(1) == 1 {
				<-r.Context().Done() // past the sink's timeout
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		defer acks.Close()
		var b bytes.Buffer
		x12gen.Remit{Control: 700, Trace: "HIST-"}.Write(&b)
		ingestNow(t, st, "h.835", b.Bytes())
		ls, _ := sink.New(sink.Config{Name: "ledger", URL: ledger.URL, Timeout: 5 * time.Second})
		as, _ := sink.New(sink.Config{Name: "acks", URL: acks.URL, Timeout: 300 * time.Millisecond})
		m := metrics.New(prometheus.NewRegistry())
		r := outbox.NewRelay(outbox.RelayConfig{Workers: 2, Idle: 20 * time.Millisecond, BackoffBase: time.Millisecond,
			BackoffMax: 10 * time.Millisecond}, st, map[string]outbox.Deliverer{"ledger": ls, "acks": as}, zap.NewNop(), m)
		runUntil(t, r, func() bool {
			c, _ := st.Counts(context.Background())
			return c.Outbox[outbox.StatusDelivered] == 2
		})
		type want struct {
			status int
			class  string
			size   int64
		}
		check := func(kind string, wants ...want) {
			t.Helper()
			row := rowOfKind(t, st, kind)
			got, err := st.Attempts(context.Background(), row.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(wants) {
				t.Fatalf("%s: %d attempts: %+v", kind, len(got), got)
			}
			for i, w := range wants {
				a := got[i]
				if a.Seq != i+1 || a.Number != i+1 || a.HTTPStatus != w.status || a.Class != w.class || a.ResponseSize != w.size ||
					a.Latency <= 0 || a.At.IsZero() {
					t.Errorf("%s attempt %d: %+v, want %+v", kind, i+1, a, w)
				}
			}
		}
		check("payment.posted", want{503, "5xx", int64(len(busy))}, want{200, "2xx", int64(len(`{"posted":true}`))})
		check("ack.999", want{0, "timeout", 0}, want{204, "2xx", 0})
		pay, _ := st.Attempts(context.Background(), rowOfKind(t, st, "payment.posted").ID)
		if pay[0].Error != "HTTP 503 Service Unavailable" || !strings.HasPrefix(busy, pay[0].Response) || len(pay[0].Response) < 200 {
			t.Errorf("503 attempt: error %q, response %q", pay[0].Error, pay[0].Response)
		}
		for _, c := range []struct {
			sink, class string
			n           float64
		}{{"ledger", "5xx", 1}, {"ledger", "2xx", 1}, {"acks", "timeout", 1}, {"acks", "2xx", 1}, {"ledger", "4xx", 0},
			{"acks", "network", 0}} {
			if got := testutil.ToFloat64(m.DeliveryAttempts.WithLabelValues(c.sink, c.class)); got != c.n {
				t.Errorf("ediwatch_delivery_attempts_total{sink=%q,class=%q} = %v, want %v", c.sink, c.class, got, c.n)
			}
		}
		if n := testutil.CollectAndCount(m.DeliveryLatency); n != 2 {
			t.Errorf("duration histogram: %d series, want one per sink", n)
		}
	})
}

// TestNetworkFailureIsAnAttempt: a refused connection is an attempt of
// class network with status 0; the breaker snooze that follows is none.
func TestNetworkFailureIsAnAttempt(t *testing.T) {
	drivers(t, func(t *testing.T, st store.Store) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close() // nothing listens there now
		var b bytes.Buffer
		x12gen.Remit{Control: 701, Trace: "NET-"}.Write(&b)
		ingestNow(t, st, "n.835", b.Bytes())
		s, _ := sink.New(sink.Config{Name: "ledger", URL: url, Timeout: time.Second})
		m := metrics.New(prometheus.NewRegistry())
		r := outbox.NewRelay(outbox.RelayConfig{Workers: 1, BreakerFailures: 1, BreakerTimeout: time.Hour,
			BackoffBase: time.Millisecond, BackoffMax: time.Millisecond, Idle: 10 * time.Millisecond},
			st, map[string]outbox.Deliverer{"ledger": s, "acks": s}, zap.NewNop(), m)
		runUntil(t, r, func() bool {
			return testutil.ToFloat64(m.Deliveries.WithLabelValues("ledger", "snoozed")) >= 1 &&
				testutil.ToFloat64(m.Deliveries.WithLabelValues("acks", "snoozed")) >= 1
		})
		// Per sink: one request opened its breaker, the retry that followed
		// was snoozed and is no attempt.
		for kind, sinkName := range map[string]string{"payment.posted": "ledger", "ack.999": "acks"} {
			got, err := st.Attempts(context.Background(), rowOfKind(t, st, kind).ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].HTTPStatus != 0 || got[0].Class != "network" || got[0].Error == "" {
				t.Errorf("%s: %+v, want one network attempt", kind, got)
			}
			if n := testutil.ToFloat64(m.DeliveryAttempts.WithLabelValues(sinkName, "network")); n != 1 {
				t.Errorf("ediwatch_delivery_attempts_total{sink=%q,class=\"network\"} = %v, want 1", sinkName, n)
			}
		}
	})
}
