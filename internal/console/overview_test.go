package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/console"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
)

// TestOverviewShowsFilesTodayDivergenceAndBreakers: the overview shows per
// source the last new file and today's files by status, the dead-letter
// depth, who holds each of its directory leases, the last day's divergence with its reasons, and per sink the
// breaker state the relay reports; /sinks shows the breaker too.
func TestOverviewShowsFilesTodayDivergenceAndBreakers(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		deadLetters(t, st)
		if _, ok, err := st.AcquireLease(context.Background(), "poll:test:/outbound/835", "replica-7", time.Hour, time.Now()); err != nil || !ok {
			t.Fatal(ok, err)
		}
		srv := serve(t, st, func(c *console.Config) {
			c.Breakers = func() map[string]string { return map[string]string{"ledger": "open", "acks": "closed"} }
		})
		resp, body := bearer(t, srv, "GET", "/", viewerToken, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("overview: %s", resp.Status)
		}
		for _, want := range []string{`<a href="/files?source=test">test</a>`, "2 ingested", `<span class="num">5</span> <a href="/dlq">dead letters</a>`,
			"divergent", "5 dead-lettered rows", `<span class="key">/outbound/835</span>: replica-7 <span class="hint">until`, `<span class="badge bad">open</span>`, `<span class="badge ok">closed</span>`} {
			if !strings.Contains(body, want) {
				t.Errorf("overview lacks %q:\n%s", want, body)
			}
		}
		if _, body := bearer(t, srv, "GET", "/sinks", viewerToken, nil); !strings.Contains(body, `<span class="badge bad">open</span>`) {
			t.Errorf("sinks page lacks the open breaker:\n%s", body)
		}
	})
}

// TestOverviewChartsFilesAndDeliveriesPerHour: the overview's inline SVG
// charts count the last day's files and deliveries per hour, one bar an
// hour, and the sinks show their deliveries of the last day.
func TestOverviewChartsFilesAndDeliveriesPerHour(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		rc, _ := deadLetters(t, st)
		if _, err := st.Replay(context.Background(), outbox.DeadFilter{Sink: "ledger"}, time.Now()); err != nil {
			t.Fatal(err)
		}
		rc.accept.Store(true)
		relayUntil(t, st, rc, func() bool { return rc.delivered.Load() == 3 })
		srv := serve(t, st, nil)
		_, body := bearer(t, srv, "GET", "/", viewerToken, nil)
		// Totals only: the rows may straddle an hour's end.
		for _, want := range []string{"Files recorded per hour: 2 (peak ", "Deliveries per hour: 3 (peak ",
			" files</title>", " deliveries</title>"} {
			if !strings.Contains(body, want) {
				t.Errorf("overview lacks %q", want)
			}
		}
		if n := strings.Count(body, `<rect class="bar"`); n != 48 {
			t.Errorf("%d bars, want 24 per chart", n)
		}
		_, body = bearer(t, srv, "GET", "/sinks", viewerToken, nil)
		// Dead 0, delivered in 24 hours 3, nothing pending.
		if !strings.Contains(body, `<td class="n">0</td><td class="n">3</td><td>—</td>`) {
			t.Errorf("sinks page lacks ledger's 3 deliveries of the day:\n%s", body)
		}
	})
}
