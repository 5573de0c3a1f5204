package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
)

// TestReconcilePageShowsTheReport: /reconcile shows the files per source
// and day, the payer's exact totals and the divergence that dead rows
// make; a bad window is a 400 naming it.
func TestReconcilePageShowsTheReport(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		deadLetters(t, st)
		srv := serve(t, st, nil)
		resp, body := bearer(t, srv, "GET", "/reconcile?since=7d", viewerToken, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("reconcile: %s", resp.Status)
		}
		for _, want := range []string{"divergent", "dead-lettered rows", "<td>test</td>", "<td>1512345678</td>"} {
			if !strings.Contains(body, want) {
				t.Errorf("no %q in\n%s", want, body)
			}
		}
		if resp, body := bearer(t, srv, "GET", "/reconcile?since=yesterday", viewerToken, nil); resp.StatusCode != http.StatusBadRequest ||
			!strings.Contains(body, "since:") {
			t.Errorf("bad since: %s", resp.Status)
		}
	})
}
