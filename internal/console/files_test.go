package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/sink"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
)

// TestFilesPagesShowArrivalsSetsEffectsAndAttempts: /files lists the
// ledger filtered by source and status; a file's page shows its sets by
// outcome, the effects it produced (claim keys digested) and each one's
// delivery attempts; an unknown file is 404.
func TestFilesPagesShowArrivalsSetsEffectsAndAttempts(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		deadLetters(t, st)
		srv := serve(t, st, nil)
		resp, body := bearer(t, srv, "GET", "/files?source=test&status=ingested&since=7d", viewerToken, nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "era.835") || !strings.Contains(body, "claims.837") {
			t.Fatalf("files: %s\n%s", resp.Status, body)
		}
		if _, body := bearer(t, srv, "GET", "/files?status=failed", viewerToken, nil); strings.Contains(body, "era.835") {
			t.Error("status filter ignored")
		}
		if resp, _ := bearer(t, srv, "GET", "/files?since=soon", viewerToken, nil); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("bad since: %s", resp.Status)
		}
		files, err := st.ListFiles(context.Background(), inbox.FileFilter{}, 10)
		if err != nil || len(files) != 2 {
			t.Fatalf("files %v %v", files, err)
		}
		for _, f := range files {
			if !strings.Contains(body, `href="/files/`+f.CorrelationID+`"`) {
				t.Errorf("no link to %s", f.Path)
			}
			d, err := st.FileDetail(context.Background(), f.CorrelationID, 100)
			if err != nil {
				t.Fatal(err)
			}
			resp, page := bearer(t, srv, "GET", "/files/"+f.CorrelationID, viewerToken, nil)
			if resp.StatusCode != http.StatusOK || !strings.Contains(page, f.Path) || !strings.Contains(page, "processed") {
				t.Fatalf("file %s: %s\n%s", f.Path, resp.Status, page)
			}
			for _, e := range d.Effects {
				if !strings.Contains(page, sink.LogKey(e.Kind, e.EffectKey)) {
					t.Errorf("%s: no effect %d", f.Path, e.ID)
				}
			}
			if !strings.Contains(page, " · 400 · ") || !strings.Contains(page, "4xx") {
				t.Errorf("%s: no attempt shown\n%s", f.Path, page)
			}
		}
		if resp, _ := bearer(t, srv, "GET", "/files/nosuch", viewerToken, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("unknown file: %s", resp.Status)
		}
	})
}
