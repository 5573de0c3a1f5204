package poller_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ediwatch/ediwatch/internal/poller"
	"github.com/ediwatch/ediwatch/internal/poller/local"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// repeating lists every entry twice, as a server whose directory pages
// overlap does.
type repeating struct{ local.Source }

func (r repeating) List(ctx context.Context, dir string) ([]poller.Entry, error) {
	entries, err := r.Source.List(ctx, dir)
	return append(entries, entries...), err
}

// TestFileListedTwiceIsTakenOnce: a listing that names a file twice does
// not download and ingest it twice at once (a second ingest is a
// duplicate sighting no partner sent).
func TestFileListedTwiceIsTakenOnce(t *testing.T) {
	for _, after := range []string{"leave", "delete"} {
		t.Run(after, func(t *testing.T) {
			dir := t.TempDir()
			remitFile(t, dir, "a.835", x12gen.Remit{Control: 4101, Trace: "TWICE-"})
			h := newHarness(t, repeating{}, []string{dir}, func(c *poller.Config) { c.After = after })
			h.poll(t)
			st := h.poll(t)
			if st.Listed != 1 || st.Downloaded != 1 || st.Ingested != 1 {
				t.Errorf("poll: %+v, want the file listed, downloaded and ingested once", st)
			}
			c := h.counts(t)
			if c.Inbox["processed"] != 1 || c.Sightings["duplicate"] != 0 {
				t.Errorf("counts %+v, want no duplicate", c)
			}
			if n := testutil.ToFloat64(h.m.Sets.WithLabelValues("duplicate")); n != 0 {
				t.Errorf("ediwatch duplicates counted: %v, want 0", n)
			}
		})
	}
}
