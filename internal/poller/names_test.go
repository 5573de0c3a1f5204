package poller_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/poller/local"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/store/drivertest"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestNameThatIsNotUTF8DoesNotBlockTheDirectory: a partner's file named
// in Latin-1 (not UTF-8, which PostgreSQL's text refuses) is ingested and
// deleted like any other, on both drivers, and does not stop the other
// files of its directory from being taken.
func TestNameThatIsNotUTF8DoesNotBlockTheDirectory(t *testing.T) {
	drivertest.Each(t, func(t *testing.T, st store.Store) {
		dir := t.TempDir()
		remitFile(t, dir, "good.835", x12gen.Remit{Control: 4301, Trace: "UTF8-GOOD"})
		remitFile(t, dir, "re\xe7u.835", x12gen.Remit{Control: 4302, Trace: "LATIN1-A"})
		remitFile(t, dir, "re\xe8u.835", x12gen.Remit{Control: 4303, Trace: "LATIN1-B"})
		h := newHarnessOn(t, st, local.Source{}, []string{dir}, func(c *poller.Config) { c.After = "delete" })
		for range 3 {
			if _, err := h.p.PollOnce(context.Background()); err != nil {
				t.Errorf("poll: %v", err)
			}
		}
		if c := h.counts(t); c.Inbox["processed"] != 3 || c.Files["ingested"] != 3 {
			t.Errorf("counts %+v, want all three files ingested", c)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("drop holds %d files", len(left))
		}
		states, err := st.FileStates(context.Background(), "acme", []string{filepath.Join(dir, `re\xE7u.835`)})
		if err != nil || states[filepath.Join(dir, `re\xE7u.835`)].Status != "ingested" {
			t.Errorf("ledger %+v %v, want the Latin-1 name recorded with its byte escaped", states, err)
		}
	})
}
