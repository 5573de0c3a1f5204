package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
)

// TestPartnerChosenTextIsEscapedOnEveryPage: a partner names the files on
// its drop, and a file that is not X12 is recorded with its name; a name
// holding markup is shown as text on the overview, the files list and
// the file's page, never as markup.
func TestPartnerChosenTextIsEscapedOnEveryPage(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		const name = `x"><script>alert(1)</script><img src=x onerror=alert(2)>.835`
		ingest(t, st, name, []byte("not x12 <script>alert(3)</script>"))
		srv := serve(t, st, nil)
		files, err := st.ListFiles(context.Background(), inbox.FileFilter{}, 10)
		if err != nil || len(files) != 1 {
			t.Fatalf("%d files: %v", len(files), err)
		}
		for _, p := range []string{"/", "/files", "/files/" + files[0].CorrelationID} {
			_, body := bearer(t, srv, "GET", p, viewerToken, nil)
			if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") {
				t.Errorf("%s renders the partner's markup:\n%s", p, body)
			}
		}
		if _, body := bearer(t, srv, "GET", "/files", viewerToken, nil); !strings.Contains(body, "&lt;script&gt;alert(1)") {
			t.Errorf("the file's name is not shown on /files:\n%s", body)
		}
	})
}
