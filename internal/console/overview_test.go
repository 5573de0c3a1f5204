package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/console"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
)

// TestOverviewShowsFilesTodayDivergenceAndBreakers: the overview shows per
// source the last new file and today's files by status, the dead-letter
// depth, the last day's divergence with its reasons, and per sink the
// breaker state the relay reports; /sinks shows the breaker too.
func TestOverviewShowsFilesTodayDivergenceAndBreakers(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		deadLetters(t, st)
		srv := serve(t, st, func(c *console.Config) {
			c.Breakers = func() map[string]string { return map[string]string{"ledger": "open", "acks": "closed"} }
		})
		resp, body := bearer(t, srv, "GET", "/", viewerToken, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("overview: %s", resp.Status)
		}
		for _, want := range []string{`<a href="/files?source=test">test</a>`, "2 ingested", `<span class="num">5</span> <a href="/dlq">dead letters</a>`,
			"divergent", "5 dead-lettered rows", `<span class="badge bad">open</span>`, `<span class="badge ok">closed</span>`} {
			if !strings.Contains(body, want) {
				t.Errorf("overview lacks %q:\n%s", want, body)
			}
		}
		if _, body := bearer(t, srv, "GET", "/sinks", viewerToken, nil); !strings.Contains(body, `<span class="badge bad">open</span>`) {
			t.Errorf("sinks page lacks the open breaker:\n%s", body)
		}
	})
}
